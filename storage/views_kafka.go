package storage

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/queen-mq/queen/wire"
)

// Read views for the Kafka facade. Like every reader they see committed
// state only, under the store's read lock.

// NodeAddr is one entry of the Kafka node registry.
type NodeAddr struct {
	ID        uint64
	KafkaAddr string
}

// KafkaNodes lists the registered nodes by id (group 0's registry).
func (s *Store) KafkaNodes() []NodeAddr {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.kafka.nodeAddrs()
}

// Topic is a queue as Kafka sees it.
type Topic struct {
	Name       string
	QueueID    uint64
	Kafka      bool // created through Kafka: configs editable
	Partitions int  // permanent indexes 0..Partitions-1
}

func topicOf(q *queueState) Topic {
	return Topic{Name: q.name, QueueID: q.id, Kafka: q.kafka, Partitions: len(q.dir)}
}

// KafkaTopics lists a tenant's queues by name.
func (s *Store) KafkaTopics(tenant wire.ID) []Topic {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Topic
	for k, q := range s.queues {
		if k.tenant == tenant && q.home {
			out = append(out, topicOf(q))
		}
	}
	slices.SortFunc(out, func(a, b Topic) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// KafkaTopic looks one queue up.
func (s *Store) KafkaTopic(tenant wire.ID, name string) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, name)
	if q == nil || !q.home {
		return Topic{}, false
	}
	return topicOf(q), true
}

// TopicConfigs returns the configs set on a topic (sorted by name; those not
// listed have their defaults) and whether the topic was created through
// Kafka. A queue created over HTTP reads as its retention options.
func (s *Store) TopicConfigs(tenant wire.ID, name string) (configs []wire.ConfigEntry, kafka, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, name)
	if q == nil {
		return nil, false, false
	}
	if !q.kafka {
		return wire.QueueTopicConfigs(&q.cfg), false, true
	}
	if tm := s.kafka.topics[q.id]; tm != nil {
		configs = slices.Clone(tm.configs)
	}
	return configs, true, true
}

// TopicSettings is what a topic's configs make queen do (ok is false when
// there is no such queue). A queue created over HTTP has the defaults.
func (s *Store) TopicSettings(tenant wire.ID, name string) (set wire.TopicSettings, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := s.queue(tenant, name)
	if q == nil {
		return wire.TopicSettings{}, false
	}
	if tm := s.kafka.topics[q.id]; q.kafka && tm != nil {
		return tm.settings, true
	}
	return wire.ParseTopicSettings(nil), true
}

// CleanedTopic is a Kafka topic whose configs ask for the log cleaner
// (wire.TopicSettings.Cleaned).
type CleanedTopic struct {
	Tenant     wire.ID
	Name       string
	Partitions int
	Settings   wire.TopicSettings
}

// CleanedTopics lists the Kafka topics this store is the home of whose
// configs ask for the log cleaner, in no particular order.
func (s *Store) CleanedTopics() []CleanedTopic {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []CleanedTopic
	for id, tm := range s.kafka.topics {
		q := s.queuesByID[id]
		if q == nil || !q.home || !q.kafka {
			continue
		}
		if tm.settings.Cleaned() {
			out = append(out, CleanedTopic{Tenant: q.tenant, Name: q.name, Partitions: len(q.dir), Settings: tm.settings})
		}
	}
	return out
}

// ChunkSpan is one stored chunk as the index describes it.
type ChunkSpan struct {
	Base, End uint64
	AppendMs  int64
	Size      int
}

// ChunkSpans calls f for p's chunks in offset order, from the index alone
// (no record is read), until f returns false.
func (s *Store) ChunkSpans(p Partition, f func(ChunkSpan) bool) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	ci := newChunkIter(s.db, s.segs, p.ID)
	for ok := ci.First(); ok; ok = ci.Next() {
		if !f(ChunkSpan{Base: ci.Base(), End: ci.End(), AppendMs: ci.Meta().appendMs, Size: ci.Meta().size}) {
			break
		}
	}
	return ci.Close()
}

// ProducerSeq is an idempotent producer's state in one partition.
type ProducerSeq struct {
	Epoch   int16
	LastSeq int32
	// Batches are its last batches as (first sequence, last sequence,
	// offset), oldest first.
	Batches [][3]int64
}

// KafkaProducer returns a producer's live state in partition p.
func (s *Store) KafkaProducer(p Partition, producer int64) (ProducerSeq, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.kafka.producer(p.ID, producer, s.clockMs)
	if st == nil {
		return ProducerSeq{}, false
	}
	out := ProducerSeq{Epoch: st.epoch, LastSeq: st.lastSeq}
	for _, b := range st.batches {
		out.Batches = append(out.Batches, [3]int64{int64(b.firstSeq), int64(b.lastSeq), int64(b.offset)})
	}
	return out, true
}

// GroupPosition is a consumer group's position in p: the next offset it
// consumes, what Kafka calls its committed offset.
func (s *Store) GroupPosition(p Partition, group string) (uint64, bool) {
	defer s.readLock()()
	cur := s.current(p)
	c := cur.cursors.get(group)
	if c == nil || cur.deleted.Load() {
		return 0, false
	}
	return c.pos, true
}

// TxnInfo is a transactional id's durable state.
type TxnInfo struct {
	Tenant        wire.ID
	TxnID         string
	ProducerID    int64
	Epoch         int16
	Ongoing       bool
	TxnSeq        uint64
	LastCommitted bool
	BeganMs       int64
	TimeoutMs     uint32
	Groups        uint64 // raft groups the transaction staged in (bit g)
	// Unsettled is the last transaction's xid while it is ended but not
	// known resolved in every one of Groups (zero: settled), ended at
	// EndedMs.
	Unsettled wire.ID
	EndedMs   int64
	// Reinit: an InitProducerId came after the last transaction ended
	// (recorded from FormatV8; never before).
	Reinit bool
}

func txnInfo(k txnKeyT, t *txnState) TxnInfo {
	return TxnInfo{Tenant: k.tenant, TxnID: k.id, ProducerID: t.producerID, Epoch: t.epoch, Ongoing: t.ongoing,
		TxnSeq: t.txnSeq, LastCommitted: t.lastCommitted, BeganMs: t.beganMs, TimeoutMs: t.timeoutMs, Groups: t.groups,
		Unsettled: t.unsettled, EndedMs: t.endedMs, Reinit: t.reinit}
}

// KafkaTxn returns a transactional id's state.
func (s *Store) KafkaTxn(tenant wire.ID, txnID string) (TxnInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k := txnKeyT{tenant, txnID}
	t := s.kafka.txns[k]
	if t == nil {
		return TxnInfo{}, false
	}
	return txnInfo(k, t), true
}

// KafkaOpenTxns lists the transactions open in this group, for the
// coordinator's timeout reaper.
func (s *Store) KafkaOpenTxns() []TxnInfo {
	return s.kafkaTxnsWhere(func(_ txnKeyT, t *txnState) bool { return t.ongoing })
}

// kafkaTxnsWhere lists the transactional ids whose state keep accepts.
func (s *Store) kafkaTxnsWhere(keep func(txnKeyT, *txnState) bool) []TxnInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []TxnInfo
	for k, t := range s.kafka.txns {
		if keep(k, t) {
			out = append(out, txnInfo(k, t))
		}
	}
	return out
}

// KafkaUnsettledTxns lists the transactional ids whose last transaction
// ended before beforeMs and is not yet settled, for the coordinator's
// finisher.
func (s *Store) KafkaUnsettledTxns(beforeMs int64) []TxnInfo {
	return s.kafkaTxnsWhere(func(_ txnKeyT, t *txnState) bool { return !t.unsettled.IsZero() && t.endedMs < beforeMs })
}

// StoredChunk is one committed chunk as ReadChunks hands it over, valid
// only during the call.
type StoredChunk struct {
	Base     uint64
	AppendMs int64
	Count    int
	// KafkaBatch: the chunk keeps a Kafka record batch as produced
	// (AppendKafkaBatch), not stored records.
	KafkaBatch bool
	loc        location
	segs       *segments
	stored     []byte // a chunk of stored records, read
}

// Records are the chunk's stored records (wire.NewRecordIter), decoded
// from its kept batch when it is one.
func (c *StoredChunk) Records() ([]byte, error) {
	if !c.KafkaBatch {
		return c.stored, nil
	}
	recs, err := c.segs.keptRecords(c.loc, c.Count, false)
	if err != nil {
		return nil, fmt.Errorf("storage: chunk at %d: %w", c.Base, err)
	}
	return recs, nil
}

// Size is the bytes the chunk takes in its segment.
func (c *StoredChunk) Size() int { return c.loc.length }

// KafkaBatchSize is the size of the chunk's kept batch.
func (c *StoredChunk) KafkaBatchSize() int { return c.loc.length - wire.KafkaBatchHeaderSize }

// AppendKafkaBatch appends the chunk's kept batch (its base offset as the
// producer sent it) to dst, read from its segment straight into dst: the
// chunk's own header lands over the last wire.KafkaBatchHeaderSize bytes of
// dst, which are saved and put back, so no byte is copied twice. dst must
// be at least that long (a caller starting empty keeps a prefix for it).
func (c *StoredChunk) AppendKafkaBatch(dst []byte) ([]byte, error) {
	const h = wire.KafkaBatchHeaderSize
	n := len(dst)
	if !c.KafkaBatch || n < h || c.loc.length < h {
		return dst, fmt.Errorf("%w: chunk at %d: no kept batch to append here", errBadKeptBatch, c.Base)
	}
	var saved [h]byte
	copy(saved[:], dst[n-h:])
	out, err := c.segs.appendAt(c.loc, dst, n-h)
	if err != nil {
		copy(dst[n-h:], saved[:])
		return dst, fmt.Errorf("storage: chunk at %d: %w", c.Base, err)
	}
	copy(out[n-h:n], saved[:])
	return out, nil
}

// ChunkFunc receives one stored chunk. Returning false stops the read.
type ChunkFunc func(c *StoredChunk) bool

// ReadChunks calls f for the committed chunks of p from the one holding
// offset from, stopping at the high-water mark (the records of the last
// chunk never reach past it: chunks are committed whole). It returns the
// high-water mark it read up to. Fetch sends a kept batch as it is and
// encodes a chunk of stored records as one Kafka record batch.
func (s *Store) ReadChunks(p Partition, from uint64, f ChunkFunc) (uint64, error) {
	hwm := p.HighWatermark()
	if from >= hwm {
		return hwm, nil
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return hwm, ErrClosed
	}
	ci := newChunkIter(s.db, s.segs, p.ID)
	var buf []byte // f keeps no bytes past its call: one buffer serves every chunk
	for ok := ci.Seek(from); ok && ci.Base() < hwm; ok = ci.Next() {
		m := ci.Meta()
		c := StoredChunk{Base: ci.Base(), AppendMs: m.appendMs, Count: m.count, KafkaBatch: m.kafkaBatch, segs: s.segs}
		loc, err := ci.locate()
		if err == nil && !m.kafkaBatch {
			buf, err = s.segs.read(loc, buf)
			c.stored = buf
		}
		if err != nil {
			_ = ci.Close()
			return hwm, fmt.Errorf("partition %d offset %d: %w", p.ID, c.Base, err)
		}
		c.loc = loc
		if !f(&c) {
			break
		}
	}
	return hwm, ci.Close()
}

// PartitionDiskUsage is the bytes p's stored records take, from the
// chunk index (before compression).
func (s *Store) PartitionDiskUsage(p Partition) int64 {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0
	}
	var n int64
	ci := newChunkIter(s.db, s.segs, p.ID)
	for ok := ci.First(); ok; ok = ci.Next() {
		n += int64(ci.Meta().size)
	}
	_ = ci.Close()
	return n
}
