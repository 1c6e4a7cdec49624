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

// partitionCache remembers partition handles. A handle's fields never
// change and its offsets are atomics, so produce and fetch skip the store's
// lock, which the apply loop holds while it commits a batch, once they have
// seen a partition. A handle whose queue was deleted (or replaced by a
// snapshot) reports Deleted and is looked up again.
type partitionCache struct {
	mu sync.RWMutex
	m  map[partitionKey]storage.Partition
}

// partition resolves Kafka partition index of topic.
func (b *Broker) partition(tenant wire.ID, topic string, index int32) (storage.Partition, bool) {
	if index < 0 {
		return storage.Partition{}, false
	}
	k := partitionKey{tenant, topic, uint32(index)}
	c := &b.parts
	c.mu.RLock()
	p, ok := c.m[k]
	c.mu.RUnlock()
	if ok && !p.Deleted() {
		return p, true
	}
	p, ok = b.engine.Store(tenant).PartitionByIndex(tenant, topic, uint32(index))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !ok:
		delete(c.m, k)
	case c.m == nil || len(c.m) >= maxCachedPartitions:
		c.m = map[partitionKey]storage.Partition{k: p}
	default:
		c.m[k] = p
	}
	return p, ok
}
