package wire

// ConfigEntry is one Kafka topic config, name and value as Kafka spells them.
type ConfigEntry struct {
	Name  string
	Value string
}

// MaxTopicConfigs bounds the configs one command may carry.
const MaxTopicConfigs = 1024

func writeConfigs(w *Writer, cs []ConfigEntry) {
	w.Uvarint(uint64(len(cs)))
	for _, c := range cs {
		w.String(c.Name)
		w.String(c.Value)
	}
}

func readConfigs(r *Reader) []ConfigEntry {
	n := r.Count(MaxTopicConfigs, 2)
	if n == 0 {
		return nil
	}
	out := make([]ConfigEntry, n)
	for i := range out {
		out[i].Name = r.String()
		out[i].Value = r.String()
	}
	return out
}

// CreateTopicCmd creates a Kafka topic: a queue whose partitions are named by
// their index, with the given configs. ReqID is chosen by the proposer and
// remembered with the topic, so a retried proposal is answered OK instead of
// "exists".
type CreateTopicCmd struct {
	Tenant     ID
	Name       string
	Partitions uint32
	Configs    []ConfigEntry
	ReqID      ID
	Place      Placement
}

// Encode appends the command body.
func (c *CreateTopicCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Name)
	w.Uvarint(uint64(c.Partitions))
	writeConfigs(&w, c.Configs)
	w.Fixed(c.ReqID[:])
	c.Place.Encode(&w)
	return w.B
}

// DecodeCreateTopicCmd decodes a create-topic body.
func DecodeCreateTopicCmd(b []byte) (CreateTopicCmd, error) {
	r := Reader{b: b}
	var c CreateTopicCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Name = r.String()
	c.Partitions = r.u32()
	c.Configs = readConfigs(&r)
	copy(c.ReqID[:], r.Fixed(16))
	c.Place.Decode(&r)
	return c, r.Done()
}

// CreatePartitionsCmd grows a topic to Count partitions (never shrinks it).
// A retried proposal that finds the topic at Count already is answered OK.
type CreatePartitionsCmd struct {
	Tenant ID
	Name   string
	Count  uint32
}

// Encode appends the command body.
func (c *CreatePartitionsCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Name)
	w.Uvarint(uint64(c.Count))
	return w.B
}

// DecodeCreatePartitionsCmd decodes a create-partitions body.
func DecodeCreatePartitionsCmd(b []byte) (CreatePartitionsCmd, error) {
	r := Reader{b: b}
	var c CreatePartitionsCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Name = r.String()
	c.Count = r.u32()
	return c, r.Done()
}

// DeleteTopicCmd deletes a topic (a queue, however it was created) with its
// Kafka bookkeeping: producer states and topic configs.
type DeleteTopicCmd struct {
	Tenant ID
	Name   string
}

// Encode appends the command body.
func (c *DeleteTopicCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Name)
	return w.B
}

// DecodeDeleteTopicCmd decodes a delete-topic body.
func DecodeDeleteTopicCmd(b []byte) (DeleteTopicCmd, error) {
	r := Reader{b: b}
	var c DeleteTopicCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Name = r.String()
	return c, r.Done()
}

// Config operations of a TopicConfigCmd (IncrementalAlterConfigs' set and
// delete; AlterConfigs is Replace with sets only).
const (
	ConfigSet    uint8 = 0
	ConfigDelete uint8 = 1
)

// ConfigOp is one change to a topic's configs.
type ConfigOp struct {
	Op    uint8
	Name  string
	Value string
}

// TopicConfigCmd changes the configs of a topic created through Kafka;
// queues created over HTTP refuse it (CodeConflict). With Replace every
// config not set by Ops goes back to its default.
type TopicConfigCmd struct {
	Tenant  ID
	Name    string
	Replace bool
	Ops     []ConfigOp
}

// Encode appends the command body.
func (c *TopicConfigCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Name)
	w.Bool(c.Replace)
	w.Uvarint(uint64(len(c.Ops)))
	for _, o := range c.Ops {
		w.U8(o.Op)
		w.String(o.Name)
		w.String(o.Value)
	}
	return w.B
}

// DecodeTopicConfigCmd decodes a topic-config body.
func DecodeTopicConfigCmd(b []byte) (TopicConfigCmd, error) {
	r := Reader{b: b}
	var c TopicConfigCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Name = r.String()
	c.Replace = r.Bool()
	n := r.Count(MaxTopicConfigs, 3)
	c.Ops = make([]ConfigOp, n)
	for i := range c.Ops {
		c.Ops[i] = ConfigOp{Op: r.U8(), Name: r.String(), Value: r.String()}
	}
	return c, r.Done()
}

// RegisterNodeCmd records where Kafka clients reach a node. Nodes propose it
// to group 0 at boot; Metadata lists the registry as the cluster's brokers.
type RegisterNodeCmd struct {
	NodeID    uint64
	KafkaAddr string // advertised host:port
}

// Encode appends the command body.
func (c *RegisterNodeCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Uvarint(c.NodeID)
	w.String(c.KafkaAddr)
	return w.B
}

// DecodeRegisterNodeCmd decodes a register-node body.
func DecodeRegisterNodeCmd(b []byte) (RegisterNodeCmd, error) {
	r := Reader{b: b}
	c := RegisterNodeCmd{NodeID: r.Uvarint(), KafkaAddr: r.String()}
	return c, r.Done()
}
