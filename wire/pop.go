package wire

// Subscription modes of a consumer group on a queue (spec §1.3).
const (
	SubNew  uint8 = 0 // only messages pushed after the group subscribed
	SubAll  uint8 = 1 // from the start of every partition
	SubFrom uint8 = 2 // from a point in time (SubFromMs)
)

// QueueModeGroup is the implicit group of competing consumers.
const QueueModeGroup = "__QUEUE_MODE__"

// MaxPopPartitions bounds how many partitions one pop may claim.
const MaxPopPartitions = 64

// PopCmd claims up to MaxPartitions partitions of a queue for a consumer
// group and leases up to Batch messages from them. The lease ids are chosen
// by the proposer (one per partition it may claim), so replaying the same
// command returns the same claims instead of taking new ones. The same id
// in every slot (SharedLease) leases every partition claimed under that one
// id (wire/lease.go); from FormatV4 on only.
type PopCmd struct {
	Tenant    ID
	Queue     string
	Partition string // empty: any partition with messages
	Group     string
	Batch     uint32
	LeaseMs   uint32 // 0: the queue's leaseTime
	SubMode   uint8
	SubFromMs int64
	// SubCreatedMs is when the group subscribed to the queue (its home
	// group decides it once); 0 lets this group's shard decide.
	SubCreatedMs     int64
	CommitOnDelivery bool
	StartHint        uint32 // where to start scanning partitions (spreads consumers)
	LeaseIDs         []ID   // len = max partitions to claim
	// MaxPartitions is how many partitions a CommitOnDelivery pop may
	// take messages from (it has no lease ids to count them by); 0 is 1.
	// It is encoded last and only when set, so entries written before it
	// existed still decode.
	MaxPartitions uint32
}

// PartitionLimit is how many partitions the pop may claim.
func (c *PopCmd) PartitionLimit() int {
	if !c.CommitOnDelivery {
		return len(c.LeaseIDs)
	}
	return max(int(c.MaxPartitions), 1)
}

// SharedLease reports whether the pop leases every partition it claims
// under one id: more than one slot, each holding the same id.
func (c *PopCmd) SharedLease() bool {
	if len(c.LeaseIDs) < 2 {
		return false
	}
	for _, id := range c.LeaseIDs[1:] {
		if id != c.LeaseIDs[0] {
			return false
		}
	}
	return true
}

// Encode appends the command body.
func (c *PopCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Fixed(c.Tenant[:])
	w.String(c.Queue)
	w.String(c.Partition)
	w.String(c.Group)
	w.Uvarint(uint64(c.Batch))
	w.Uvarint(uint64(c.LeaseMs))
	w.U8(c.SubMode)
	w.Varint(c.SubFromMs)
	w.Varint(c.SubCreatedMs)
	w.Bool(c.CommitOnDelivery)
	w.Uvarint(uint64(c.StartHint))
	w.Uvarint(uint64(len(c.LeaseIDs)))
	for _, id := range c.LeaseIDs {
		w.Fixed(id[:])
	}
	if c.MaxPartitions != 0 {
		w.Uvarint(uint64(c.MaxPartitions))
	}
	return w.B
}

// DecodePopCmd decodes a pop body.
func DecodePopCmd(b []byte) (PopCmd, error) {
	r := Reader{b: b}
	var c PopCmd
	copy(c.Tenant[:], r.Fixed(16))
	c.Queue = r.String()
	c.Partition = r.String()
	c.Group = r.String()
	c.Batch = r.u32()
	c.LeaseMs = r.u32()
	c.SubMode = r.U8()
	c.SubFromMs = r.Varint()
	c.SubCreatedMs = r.Varint()
	c.CommitOnDelivery = r.Bool()
	c.StartHint = r.u32()
	n := r.Count(MaxPopPartitions, 16)
	c.LeaseIDs = make([]ID, n)
	for i := range c.LeaseIDs {
		copy(c.LeaseIDs[i][:], r.Fixed(16))
	}
	if r.Len() > 0 {
		if c.MaxPartitions = r.u32(); c.MaxPartitions > MaxPopPartitions {
			r.fail("pop partitions")
		}
	}
	return c, r.Done()
}

// Claim is one partition a pop leased: messages [From, To) under LeaseID.
// Messages below RedeliverTo were delivered before and now carry delivery
// attempt Attempt; later ones are delivered for the first time.
type Claim struct {
	PartitionID    uint64
	PartitionIndex uint32
	Partition      string
	LeaseID        ID // zero with commitOnDelivery
	From, To       uint64
	RedeliverTo    uint64
	Attempt        uint32
	LeaseExpiresMs int64
}

// DeliveryAttempt is the delivery attempt of the message at offset.
func (c *Claim) DeliveryAttempt(offset uint64) uint32 {
	if offset < c.RedeliverTo && c.Attempt > 1 {
		return c.Attempt
	}
	return 1
}

// PopResult answers a PopCmd.
type PopResult struct {
	Code   Code
	Claims []Claim
}

// Encode appends the result.
func (p PopResult) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.U8(uint8(p.Code))
	w.Uvarint(uint64(len(p.Claims)))
	for i := range p.Claims {
		c := &p.Claims[i]
		w.Uvarint(c.PartitionID)
		w.Uvarint(uint64(c.PartitionIndex))
		w.String(c.Partition)
		w.Fixed(c.LeaseID[:])
		w.Uvarint(c.From)
		w.Uvarint(c.To)
		w.Uvarint(c.RedeliverTo)
		w.Uvarint(uint64(c.Attempt))
		w.Varint(c.LeaseExpiresMs)
	}
	return w.B
}

// DecodePopResult decodes a pop result.
func DecodePopResult(b []byte) (PopResult, error) {
	r := Reader{b: b}
	var p PopResult
	p.Code = Code(r.U8())
	n := r.Count(MaxPopPartitions, 24)
	p.Claims = make([]Claim, n)
	for i := range p.Claims {
		c := &p.Claims[i]
		c.PartitionID = r.Uvarint()
		c.PartitionIndex = r.u32()
		c.Partition = r.String()
		copy(c.LeaseID[:], r.Fixed(16))
		c.From = r.Uvarint()
		c.To = r.Uvarint()
		c.RedeliverTo = r.Uvarint()
		c.Attempt = r.u32()
		c.LeaseExpiresMs = r.Varint()
	}
	return p, r.Done()
}
