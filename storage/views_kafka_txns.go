package storage

import (
	"cmp"
	"slices"

	"github.com/queen-mq/queen/wire"
)

// Read views of the Kafka transaction bookkeeping for the admin APIs that
// look for hanging transactions (KIP-664: DescribeProducers,
// DescribeTransactions, ListTransactions). Like every reader they see
// committed state only, under the store's read lock.

// ActiveProducer is an idempotent or transactional producer as a
// partition knows it: what DescribeProducers answers for it.
type ActiveProducer struct {
	ProducerID int64
	Epoch      int16
	// LastSeq is the sequence of its last record here and LastMs when
	// that batch was appended (the cluster's clock); -1 both when only an
	// open transaction names the producer (its state expired).
	LastSeq int32
	LastMs  int64
	// TxnStart is the first offset of its transaction still open here, -1
	// when none is.
	TxnStart int64
}

// KafkaProducers lists the producers partition p knows, by producer id:
// those whose state is live, and those with a transaction open in p even
// when their state expired, since an open transaction holds p's last
// stable offset back (a hanging transaction is what this view finds).
func (s *Store) KafkaProducers(p Partition) []ActiveProducer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	byID := map[int64]*ActiveProducer{}
	for id := range s.kafka.producers[p.ID] {
		if st := s.kafka.producer(p.ID, id, s.clockMs); st != nil {
			byID[id] = &ActiveProducer{ProducerID: id, Epoch: st.epoch, LastSeq: st.lastSeq, LastMs: st.lastMs, TxnStart: -1}
		}
	}
	if t := s.kafka.txnsOf(p.ID); t != nil {
		for _, o := range t.open {
			if len(o.batches) == 0 {
				continue
			}
			first := int64(o.batches[0].From)
			a := byID[o.producer]
			switch {
			case a == nil:
				byID[o.producer] = &ActiveProducer{ProducerID: o.producer, Epoch: o.epoch, LastSeq: -1, LastMs: -1, TxnStart: first}
			case a.TxnStart < 0 || first < a.TxnStart:
				a.TxnStart = first
			}
		}
	}
	out := make([]ActiveProducer, 0, len(byID))
	for _, a := range byID {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b ActiveProducer) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// KafkaTxnsOf lists the transactional ids of tenant whose state this
// group holds (the engine sorts what it gathers over groups).
func (s *Store) KafkaTxnsOf(tenant wire.ID) []TxnInfo {
	return s.kafkaTxnsWhere(func(k txnKeyT, _ *txnState) bool { return k.tenant == tenant })
}

// TxnPartition is a Kafka partition, by topic and index.
type TxnPartition struct {
	Topic     string
	Partition int32
}

// KafkaTxnPartitions lists the partitions of tenant in this group holding
// open batches of transaction xid of producer: those it wrote to and whose
// marker is not written yet (unsorted: SortTxnPartitions).
func (s *Store) KafkaTxnPartitions(tenant, xid wire.ID, producer int64) []TxnPartition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []TxnPartition
	for pid, t := range s.kafka.partTxns {
		if !slices.ContainsFunc(t.open, func(o openTxn) bool { return o.owns(xid, producer) }) {
			continue
		}
		// A partition with transaction bookkeeping never leaves memory
		// (partcache.go, evictable).
		p := s.parts[pid]
		if p == nil || p.deleted.Load() || p.q.tenant != tenant {
			continue
		}
		out = append(out, TxnPartition{Topic: p.q.name, Partition: int32(p.index)})
	}
	return out
}

// SortTxnPartitions sorts ps by topic, then partition.
func SortTxnPartitions(ps []TxnPartition) {
	slices.SortFunc(ps, func(a, b TxnPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}
