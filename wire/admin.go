package wire

// ExtendLeaseCmd pushes a live lease's expiry to now + Ms.
type ExtendLeaseCmd struct {
	Tenant  ID
	LeaseID ID
	Ms      uint32
}

// Encode appends the command body.
func (c *ExtendLeaseCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.Fixed(c.LeaseID[:])
	w.Uvarint(uint64(c.Ms))
	return w.B
}

// DecodeExtendLeaseCmd decodes an extend body.
func DecodeExtendLeaseCmd(b []byte) (ExtendLeaseCmd, error) {
	r := Reader{b: b}
	var c ExtendLeaseCmd
	copy(c.Tenant[:], r.Fixed(16))
	copy(c.LeaseID[:], r.Fixed(16))
	c.Ms = r.u32()
	return c, r.Done()
}

// ExtendLeaseResult answers an ExtendLeaseCmd.
type ExtendLeaseResult struct {
	Code      Code
	ExpiresMs int64
	// Renewed is how many partitions' leases moved: 1 for a per-partition
	// lease, each partition holding a shared one in the group. It travels
	// only when above 1, so a result of one lease has the bytes it had.
	Renewed uint32
}

// Encode appends the result.
func (e ExtendLeaseResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(e.Code))
	w.Varint(e.ExpiresMs)
	if e.Renewed > 1 {
		w.Uvarint(uint64(e.Renewed))
	}
	return w.B
}

// DecodeExtendLeaseResult decodes an extend result.
func DecodeExtendLeaseResult(b []byte) (ExtendLeaseResult, error) {
	r := Reader{b: b}
	e := ExtendLeaseResult{Code: Code(r.U8()), ExpiresMs: r.Varint()}
	if r.Len() > 0 {
		e.Renewed = r.u32()
	} else if e.Code == CodeOK {
		e.Renewed = 1
	}
	return e, r.Done()
}

// CommitPositionCmd sets a consumer group's position in one partition: the
// next offset the group will consume (a Kafka committed offset).
type CommitPositionCmd struct {
	Tenant         ID
	Queue          string
	Group          string
	Partition      string
	PartitionIndex int32 // >= 0 addresses the partition by index
	Offset         uint64
	Metadata       string
}

// Encode appends the command body.
func (c *CommitPositionCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Group)
	w.String(c.Partition)
	w.Varint(int64(c.PartitionIndex))
	w.Uvarint(c.Offset)
	w.String(c.Metadata)
	return w.B
}

// DecodeCommitPositionCmd decodes a commit body.
func DecodeCommitPositionCmd(b []byte) (CommitPositionCmd, error) {
	r := Reader{b: b}
	var c CommitPositionCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Group = r.String()
	c.Partition = r.String()
	c.PartitionIndex = int32(r.Varint())
	c.Offset = r.Uvarint()
	c.Metadata = r.String()
	return c, r.Done()
}

// ConfigureCmd creates a queue or changes its options. Options named in Set
// are taken from Config; options named in Reset go back to their defaults;
// with Replace every option not in Set goes back to its default.
type ConfigureCmd struct {
	Tenant       ID
	Queue        string
	Namespace    string
	Task         string
	SetNamespace bool
	SetTask      bool
	Replace      bool
	Set, Reset   uint32
	Config       QueueConfig
	// Place is where a queue this command creates puts its partitions.
	Place Placement
}

// Encode appends the command body.
func (c *ConfigureCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Namespace)
	w.String(c.Task)
	w.Bool(c.SetNamespace)
	w.Bool(c.SetTask)
	w.Bool(c.Replace)
	w.Uvarint(uint64(c.Set))
	w.Uvarint(uint64(c.Reset))
	c.Config.Encode(&w)
	c.Place.Encode(&w)
	return w.B
}

// DecodeConfigureCmd decodes a configure body.
func DecodeConfigureCmd(b []byte) (ConfigureCmd, error) {
	r := Reader{b: b}
	var c ConfigureCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Namespace = r.String()
	c.Task = r.String()
	c.SetNamespace = r.Bool()
	c.SetTask = r.Bool()
	c.Replace = r.Bool()
	c.Set = r.u32()
	c.Reset = r.u32()
	c.Config.Decode(&r)
	c.Place.Decode(&r)
	return c, r.Done()
}

// ConfigureResult answers a ConfigureCmd with the queue's effective state.
type ConfigureResult struct {
	Code      Code
	QueueID   uint64
	Created   bool
	Namespace string
	Task      string
	Config    QueueConfig
	// Catalog is the queue's catalog after the change, for the engine to
	// carry the options to the queue's other groups.
	Catalog Catalog
}

// Encode appends the result.
func (c ConfigureResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(c.Code))
	w.Uvarint(c.QueueID)
	w.Bool(c.Created)
	w.String(c.Namespace)
	w.String(c.Task)
	c.Config.Encode(&w)
	c.Catalog.Encode(&w)
	return w.B
}

// DecodeConfigureResult decodes a configure result.
func DecodeConfigureResult(b []byte) (ConfigureResult, error) {
	r := Reader{b: b}
	var c ConfigureResult
	c.Code = Code(r.U8())
	c.QueueID = r.Uvarint()
	c.Created = r.Bool()
	c.Namespace = r.String()
	c.Task = r.String()
	c.Config.Decode(&r)
	c.Catalog.Decode(&r)
	return c, r.Done()
}

// DeleteQueueCmd deletes a queue with all its partitions, messages and
// consumer state.
type DeleteQueueCmd struct {
	Tenant ID
	Queue  string
}

// Encode appends the command body.
func (c *DeleteQueueCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	return w.B
}

// DecodeDeleteQueueCmd decodes a delete body.
func DecodeDeleteQueueCmd(b []byte) (DeleteQueueCmd, error) {
	r := Reader{b: b}
	var c DeleteQueueCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	return c, r.Done()
}

// CodeResult is the result of commands that answer only a code.
type CodeResult struct{ Code Code }

// Encode appends the result.
func (c CodeResult) Encode(b []byte) []byte { return append(b, uint8(c.Code)) }

// DecodeCodeResult decodes a code-only result.
func DecodeCodeResult(b []byte) (CodeResult, error) {
	r := Reader{b: b}
	c := CodeResult{Code: Code(r.U8())}
	return c, r.Done()
}
