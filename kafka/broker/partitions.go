package broker

import (
	"sync"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// maxCachedPartitions bounds the partition cache; when full it starts over.
const maxCachedPartitions = 1 << 16

type partitionKey struct {
	tenant wire.ID
	topic  string
	index  uint32
}

// cachedPartition is a Kafka partition as produce and fetch need it: the
// handle to read it through (its Store is the raft group's), the raft
// group holding it, which decides who leads it and where its produces go,
// and the incarnation of its queue, which every produce carries.
type cachedPartition struct {
	storage.Partition
	group int
	inc   uint64
	// epochBase is added to the group's term for the partition's leader
	// epoch (non-zero once it moved, docs/placement.md).
	epochBase uint32
}

// partitionCache remembers partitions. A handle's fields never change and
// its offsets are atomics, so produce and fetch skip the stores' locks,
// which the apply loops hold while they commit a batch, once they have
// seen a partition. A handle whose queue was deleted (or replaced by a
// snapshot), or whose partition was sealed to move to another group,
// reports Deleted and is looked up again; one refused as stale by its
// group is forgotten.
type partitionCache struct {
	mu sync.RWMutex
	m  map[partitionKey]cachedPartition
}

// partition resolves Kafka partition index of topic.
func (b *Broker) partition(tenant wire.ID, topic string, index int32) (cachedPartition, bool) {
	if index < 0 {
		return cachedPartition{}, false
	}
	k := partitionKey{tenant, topic, uint32(index)}
	c := &b.parts
	c.mu.RLock()
	p, ok := c.m[k]
	c.mu.RUnlock()
	if ok && !p.Deleted() {
		return p, true
	}
	p, ok = b.lookupPartition(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !ok:
		delete(c.m, k)
	case c.m == nil || len(c.m) >= maxCachedPartitions:
		c.m = map[partitionKey]cachedPartition{k: p}
	default:
		c.m[k] = p
	}
	return p, ok
}

// lookupPartition finds a partition through its queue's catalog and
// directory, at the home, and reads its handle from the group the
// directory places it in. A replica of that group still holding a shard of
// an earlier incarnation of the queue (deleted and created again, the drop
// not applied here yet) does not hold the partition yet.
func (b *Broker) lookupPartition(k partitionKey) (cachedPartition, bool) {
	cat, ok := b.engine.Catalog(k.tenant, k.topic)
	if !ok {
		return cachedPartition{}, false
	}
	d, ok := b.engine.DirByIndex(k.tenant, k.topic, k.index)
	if !ok {
		return cachedPartition{}, false
	}
	st := b.engine.GroupStore(int(d.Group))
	if !st.HasPartitionAt(k.tenant, k.topic, cat.Inc, k.index) {
		return cachedPartition{}, false
	}
	p, ok := st.PartitionByIndex(k.tenant, k.topic, k.index)
	return cachedPartition{Partition: p, group: int(d.Group), inc: cat.Inc, epochBase: d.EpochBase}, ok
}

// forgetPartition drops a cached partition its group refused (its queue
// was deleted or created again), so the next request looks it up afresh.
func (b *Broker) forgetPartition(tenant wire.ID, topic string, index int32) {
	c := &b.parts
	c.mu.Lock()
	delete(c.m, partitionKey{tenant, topic, uint32(index)})
	c.mu.Unlock()
}
