package wire

// Placement: a queue's partitions are spread over raft groups (spec
// decision 4, docs/placement.md). The queue's catalog (its options, labels
// and the directory of its partitions) lives in one group, its home; each
// partition lives, with its log, cursors and leases, in the group the
// directory names; a group holding partitions of a queue keeps a shard of it
// (a copy of the options and its own partitions).

// GroupBits is how many low bits of a group-allocated number (partition ids,
// dead-letter row ids, Kafka producer ids) name the group that allocated it,
// so any node can route a request by the id alone.
const GroupBits = 8

// MaxGroups bounds the number of raft groups ids can name.
const MaxGroups = 1 << GroupBits

// GroupID tags the n-th number a group hands out with the group.
func GroupID(n uint64, group int) uint64 { return n<<GroupBits | uint64(group) }

// GroupOfID is the group that allocated id.
func GroupOfID(id uint64) int { return int(id & (MaxGroups - 1)) }

// TagID marks a 16-byte id chosen for a group (lease ids) with the group, in
// its last byte (random bits of a UUID v4 or v7).
func TagID(id ID, group int) ID {
	id[15] = byte(group)
	return id
}

// GroupOfTag is the group TagID marked id with.
func GroupOfTag(id ID) int { return int(id[15]) }

// Placement says where a queue's partitions go: partition i in
// Groups[(Start+i) mod len(Groups)]. The home is partition 0's group. It is
// decided once, when the queue's catalog is created, and stored with it, so
// later partitions go where the rule said at creation.
type Placement struct {
	Groups []uint16 // the groups the queue's tenant may use, ascending
	Start  uint32
}

// GroupOf is the group partition index is placed in.
func (p *Placement) GroupOf(index uint32) int {
	if len(p.Groups) == 0 {
		return 0
	}
	return int(p.Groups[(uint64(p.Start)+uint64(index))%uint64(len(p.Groups))])
}

// Home is the group holding the catalog.
func (p *Placement) Home() int { return p.GroupOf(0) }

// Valid reports whether the placement names at least one group, each in
// range.
func (p *Placement) Valid() bool {
	if len(p.Groups) == 0 {
		return false
	}
	for _, g := range p.Groups {
		if int(g) >= MaxGroups {
			return false
		}
	}
	return true
}

// Encode appends p.
func (p *Placement) Encode(w *Writer) {
	w.Uvarint(uint64(len(p.Groups)))
	for _, g := range p.Groups {
		w.Uvarint(uint64(g))
	}
	w.Uvarint(uint64(p.Start))
}

// Decode reads what Encode wrote.
func (p *Placement) Decode(r *Reader) {
	n := r.Count(MaxGroups, 1)
	p.Groups = make([]uint16, n)
	for i := range p.Groups {
		g := r.Uvarint()
		if g >= MaxGroups {
			r.fail("group out of range")
			return
		}
		p.Groups[i] = uint16(g)
	}
	p.Start = r.u32()
}

// Catalog is a queue's catalog as its home group holds it, and as shards
// copy it. Inc names the queue's incarnation: a queue deleted and created
// again under the same name gets a new one, so a shard of the old one is
// never mistaken for the new one. CfgVer counts option changes; a shard
// takes options only from a newer version.
type Catalog struct {
	Inc        uint64
	CfgVer     uint64
	Cfg        QueueConfig
	Namespace  string
	Task       string
	Kafka      bool
	CreatedMs  int64
	Place      Placement
	Partitions uint32 // directory size, removed partitions' indexes included: the next index (home only)
	Groups     uint64 // bit g: group g holds partitions (home only)
}

// Encode appends c.
func (c *Catalog) Encode(w *Writer) {
	w.Uvarint(c.Inc)
	w.Uvarint(c.CfgVer)
	c.Cfg.Encode(w)
	w.String(c.Namespace)
	w.String(c.Task)
	w.Bool(c.Kafka)
	w.Varint(c.CreatedMs)
	c.Place.Encode(w)
	w.Uvarint(uint64(c.Partitions))
	w.U64(c.Groups)
}

// Decode reads what Encode wrote.
func (c *Catalog) Decode(r *Reader) {
	c.Inc = r.Uvarint()
	c.CfgVer = r.Uvarint()
	c.Cfg.Decode(r)
	c.Namespace = r.String()
	c.Task = r.String()
	c.Kafka = r.Bool()
	c.CreatedMs = r.Varint()
	c.Place.Decode(r)
	c.Partitions = r.u32()
	c.Groups = r.U64()
}

// DirEntry is one partition in a queue's directory.
type DirEntry struct {
	Index     uint32
	Name      string
	Group     uint16
	CreatedMs int64
	// EpochBase is added to the group's raft term to make the
	// partition's Kafka leader epoch, so a partition moved to a group of
	// a lower term never shows an older epoch (storage/move.go). Read
	// from a home's store only; commands never carry it.
	EpochBase uint32
}

func (d *DirEntry) encode(w *Writer) {
	w.Uvarint(uint64(d.Index))
	w.String(d.Name)
	w.Uvarint(uint64(d.Group))
	w.Varint(d.CreatedMs)
}

func (d *DirEntry) decode(r *Reader) {
	d.Index = r.u32()
	d.Name = r.String()
	g := r.Uvarint()
	if g >= MaxGroups {
		r.fail("group out of range")
	}
	d.Group = uint16(g)
	d.CreatedMs = r.Varint()
}

func encodeDir(w *Writer, parts []DirEntry) {
	w.Uvarint(uint64(len(parts)))
	for i := range parts {
		parts[i].encode(w)
	}
}

func decodeDir(r *Reader) []DirEntry {
	n := r.Count(MaxAllocPartitions, 4)
	if n == 0 {
		return nil
	}
	out := make([]DirEntry, n)
	for i := range out {
		out[i].decode(r)
	}
	return out
}

// Alloc flags.
const (
	// AllocCreate creates the queue's catalog when it does not exist.
	AllocCreate uint8 = 1 << iota
	// AllocKafka marks a queue it creates as a Kafka topic (partitions
	// named by index, the configure defaults).
	AllocKafka
)

// MaxAllocPartitions bounds the partitions one AllocCmd may add or list.
const MaxAllocPartitions = 1 << 20

// AllocCmd, applied in a queue's home group, makes sure the catalog exists
// (with AllocCreate) and that the directory holds the named partitions and
// at least Count partitions (index-named, Kafka), placing each new one with
// the catalog's placement. It answers the catalog and the directory entries
// of every name asked for, and of every partition below Count.
type AllocCmd struct {
	Tenant    ID
	Queue     string
	Flags     uint8
	Namespace string // labels of a queue it creates
	Task      string
	Place     Placement // placement of a queue it creates
	Names     []string
	Count     uint32
	// Gone lists indexes whose partitions their group refused a push for
	// as removed (CodePartitionGone): the home drops their directory
	// entries first, so the names they had are allocated afresh.
	Gone []uint32
}

// Encode appends the command body.
func (c *AllocCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.U8(c.Flags)
	w.String(c.Namespace)
	w.String(c.Task)
	c.Place.Encode(&w)
	w.Uvarint(uint64(len(c.Names)))
	for _, n := range c.Names {
		w.String(n)
	}
	w.Uvarint(uint64(c.Count))
	if len(c.Gone) > 0 { // absent when empty: the body reads as before there were any
		w.Uvarint(uint64(len(c.Gone)))
		for _, i := range c.Gone {
			w.Uvarint(uint64(i))
		}
	}
	return w.B
}

// DecodeAllocCmd decodes an alloc body.
func DecodeAllocCmd(b []byte) (AllocCmd, error) {
	r := Reader{b: b}
	var c AllocCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Flags = r.U8()
	c.Namespace = r.String()
	c.Task = r.String()
	c.Place.Decode(&r)
	n := r.Count(MaxAllocPartitions, 1)
	if n > 0 {
		c.Names = make([]string, n)
		for i := range c.Names {
			c.Names[i] = r.String()
		}
	}
	c.Count = r.u32()
	if r.Len() > 0 {
		if n := r.Count(MaxDropDir, 1); n > 0 {
			c.Gone = make([]uint32, n)
			for i := range c.Gone {
				c.Gone[i] = r.u32()
			}
		}
	}
	return c, r.Done()
}

// AllocResult answers an AllocCmd.
type AllocResult struct {
	Code    Code
	Created bool
	Catalog Catalog
	Parts   []DirEntry // the names asked for, in order, then partitions 0..Count-1
}

// Encode appends the result.
func (a AllocResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(a.Code))
	w.Bool(a.Created)
	a.Catalog.Encode(&w)
	encodeDir(&w, a.Parts)
	return w.B
}

// DecodeAllocResult decodes an alloc result.
func DecodeAllocResult(b []byte) (AllocResult, error) {
	r := Reader{b: b}
	a := AllocResult{Code: Code(r.U8()), Created: r.Bool()}
	a.Catalog.Decode(&r)
	a.Parts = decodeDir(&r)
	return a, r.Done()
}

// EnsureShardCmd, applied in a group holding (or about to hold) partitions
// of a queue, makes its shard match the catalog: created when missing (or
// when it is a shard of an older incarnation, which is dropped first), its
// options taken when the catalog's version is newer, the listed partitions
// created at their index, and the listed consumer-group subscriptions
// added. It is how partitions are created and how option changes and
// subscriptions reach every group of a queue (retention and expiry in a
// group must know every group subscribed, or they would count a message
// consumed that a subscribed group never read).
type EnsureShardCmd struct {
	Tenant  ID
	Queue   string
	Catalog Catalog
	Parts   []DirEntry
	Subs    []SubEntry
}

// SubEntry is one consumer group's subscription to a queue.
type SubEntry struct {
	Group string
	Sub   Subscription
}

// Encode appends the command body.
func (c *EnsureShardCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	c.Catalog.Encode(&w)
	encodeDir(&w, c.Parts)
	w.Uvarint(uint64(len(c.Subs)))
	for _, s := range c.Subs {
		w.String(s.Group)
		w.U8(s.Sub.Mode)
		w.Varint(s.Sub.FromMs)
		w.Varint(s.Sub.CreatedMs)
	}
	return w.B
}

// DecodeEnsureShardCmd decodes an ensure-shard body.
func DecodeEnsureShardCmd(b []byte) (EnsureShardCmd, error) {
	r := Reader{b: b}
	var c EnsureShardCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Catalog.Decode(&r)
	c.Parts = decodeDir(&r)
	if n := r.Count(MaxAllocPartitions, 4); n > 0 {
		c.Subs = make([]SubEntry, n)
		for i := range c.Subs {
			s := &c.Subs[i]
			s.Group = r.String()
			s.Sub.Mode = r.U8()
			s.Sub.FromMs = r.Varint()
			s.Sub.CreatedMs = r.Varint()
		}
	}
	return c, r.Done()
}

// DropShardCmd deletes a group's shard of incarnation Inc of a queue (a
// queue deleted at its home, or a shard left behind).
type DropShardCmd struct {
	Tenant ID
	Queue  string
	Inc    uint64
}

// Encode appends the command body.
func (c *DropShardCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.Uvarint(c.Inc)
	return w.B
}

// DecodeDropShardCmd decodes a drop-shard body.
func DecodeDropShardCmd(b []byte) (DropShardCmd, error) {
	r := Reader{b: b}
	var c DropShardCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Inc = r.Uvarint()
	return c, r.Done()
}

// SubscribeCmd, applied in a queue's home group, creates a consumer group's
// subscription to the queue once (later ones find it): its mode and
// creation time then travel with every pop, so every group holding
// partitions of the queue starts them alike.
type SubscribeCmd struct {
	Tenant ID
	Queue  string
	Group  string
	Mode   uint8
	FromMs int64
}

// Encode appends the command body.
func (c *SubscribeCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Group)
	w.U8(c.Mode)
	w.Varint(c.FromMs)
	return w.B
}

// DecodeSubscribeCmd decodes a subscribe body.
func DecodeSubscribeCmd(b []byte) (SubscribeCmd, error) {
	r := Reader{b: b}
	var c SubscribeCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Group = r.String()
	c.Mode = r.U8()
	c.FromMs = r.Varint()
	return c, r.Done()
}

// Subscription is a consumer group's subscription to a queue.
type Subscription struct {
	Mode      uint8
	FromMs    int64
	CreatedMs int64
}

// SubscribeResult answers a SubscribeCmd with the subscription in force.
type SubscribeResult struct {
	Code Code
	Sub  Subscription
}

// Encode appends the result.
func (s SubscribeResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(s.Code))
	w.U8(s.Sub.Mode)
	w.Varint(s.Sub.FromMs)
	w.Varint(s.Sub.CreatedMs)
	return w.B
}

// DecodeSubscribeResult decodes a subscribe result.
func DecodeSubscribeResult(b []byte) (SubscribeResult, error) {
	r := Reader{b: b}
	s := SubscribeResult{Code: Code(r.U8())}
	s.Sub.Mode = r.U8()
	s.Sub.FromMs = r.Varint()
	s.Sub.CreatedMs = r.Varint()
	return s, r.Done()
}

// DeleteQueueResult answers a queue deletion at its home: the incarnation
// deleted and the groups whose shards must go too.
type DeleteQueueResult struct {
	Code   Code
	Inc    uint64
	Groups uint64
}

// Encode appends the result.
func (d DeleteQueueResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(d.Code))
	w.Uvarint(d.Inc)
	w.U64(d.Groups)
	return w.B
}

// DecodeDeleteQueueResult decodes a delete result.
func DecodeDeleteQueueResult(b []byte) (DeleteQueueResult, error) {
	r := Reader{b: b}
	d := DeleteQueueResult{Code: Code(r.U8()), Inc: r.Uvarint(), Groups: r.U64()}
	return d, r.Done()
}
