package storage

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/queen-mq/queen/wire"
)

// The Kafka facade's replicated bookkeeping, all under tagKafka: the node
// registry, the producer id counter, each idempotent producer's state per
// partition, each transactional id's state and the configs of topics created
// through Kafka. Everything here is loaded into memory on Open and written
// through in the apply batch that changes it.
const (
	kafkaNode     = 'n' // node id → advertised Kafka address (group 0)
	kafkaCounters = 'c' // → next producer id
	kafkaProducer = 'p' // pid, producer id → producer state in that partition
	kafkaTxn      = 'x' // tenant, transactional id → transaction state
	kafkaTopic    = 't' // qid → topic configs
	kafkaMember   = 'm' // node id → HTTP address of a raft member (group 0)
	kafkaMembers  = 'g' // tenant, consumer group → generation, membership
	// A partition's transactions (kafka_txn_marks.go): its open ones, its
	// skipped ranges and its aborted transactions.
	kafkaPartTxns    = 'a' // pid → open transactions
	kafkaPartSkip    = 'k' // pid, first offset → end of a skipped range
	kafkaPartAborted = 'b' // pid, marker offset → aborted transaction
)

// Bounds of the producer states kept per partition: the batches remembered
// per producer (Kafka's max.in.flight.requests.per.connection with
// idempotence), and producers per partition before the least recently
// active one is forgotten.
const (
	producerBatches          = 5
	maxProducersPerPartition = 4096
)

func kafkaKey(kind byte, parts ...[]byte) []byte {
	b := []byte{tagKafka, kind}
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u64Bytes(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func nodeKey(id uint64) []byte { return kafkaKey(kafkaNode, u64Bytes(id)) }

func memberKey(id uint64) []byte { return kafkaKey(kafkaMember, u64Bytes(id)) }

func producerKey(pid uint64, producer int64) []byte {
	return kafkaKey(kafkaProducer, u64Bytes(pid), u64Bytes(uint64(producer)))
}

func producerPrefix(pid uint64) []byte { return kafkaKey(kafkaProducer, u64Bytes(pid)) }

func txnStateKey(tenant wire.ID, txnID string) []byte {
	return kafkaKey(kafkaTxn, tenant[:], []byte(txnID))
}

func topicKey(qid uint64) []byte { return kafkaKey(kafkaTopic, u64Bytes(qid)) }

func membersKey(tenant wire.ID, group string) []byte {
	return kafkaKey(kafkaMembers, tenant[:], []byte(group))
}

var kafkaCountersKey = kafkaKey(kafkaCounters)

// kafkaState is the in-memory side of the bookkeeping.
type kafkaState struct {
	nodes          map[uint64]string
	memberAddrs    map[uint64]string // raft member id → HTTP address
	nextProducerID int64
	producers      map[uint64]map[int64]*producerState // partition id → producer id →
	txns           map[txnKeyT]*txnState
	topics         map[uint64]*topicMeta // queue id →
	// members is each consumer group's membership as its coordinator last
	// recorded it (GroupMembersCmd), opaque to the store.
	members map[txnKeyT]GroupMembers
	// partTxns are the transaction bookkeeping of the partitions that
	// have some, by partition id.
	partTxns map[uint64]*partTxns
	// nextExpiryMs is no later than the earliest producer state expiry:
	// when the producer sweeper next has work.
	nextExpiryMs int64
}

type txnKeyT struct {
	tenant wire.ID
	id     string
}

// batchMeta is one producer batch remembered for duplicate detection.
type batchMeta struct {
	firstSeq, lastSeq int32
	offset            uint64
}

// producerState is an idempotent producer's state in one partition.
type producerState struct {
	epoch   int16
	lastSeq int32
	lastMs  int64
	ttlMs   uint32
	batches []batchMeta // oldest first, at most producerBatches
}

func (p *producerState) expired(nowMs int64) bool { return nowMs >= p.lastMs+int64(p.ttlMs) }

// find returns the offset of a remembered batch with exactly these
// sequences.
func (p *producerState) find(first, last int32) (uint64, bool) {
	for _, b := range p.batches {
		if b.firstSeq == first && b.lastSeq == last {
			return b.offset, true
		}
	}
	return 0, false
}

func (p *producerState) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 32+12*len(p.batches))}
	w.Varint(int64(p.epoch))
	w.Varint(int64(p.lastSeq))
	w.Varint(p.lastMs)
	w.Uvarint(uint64(p.ttlMs))
	w.Uvarint(uint64(len(p.batches)))
	for _, b := range p.batches {
		w.Varint(int64(b.firstSeq))
		w.Varint(int64(b.lastSeq))
		w.Uvarint(b.offset)
	}
	return w.B
}

func decodeProducer(b []byte) (*producerState, error) {
	r := wire.NewReader(b)
	p := &producerState{epoch: int16(r.Varint()), lastSeq: int32(r.Varint()), lastMs: r.Varint(), ttlMs: uint32(r.Uvarint())}
	n := r.Count(producerBatches, 3)
	for range n {
		p.batches = append(p.batches, batchMeta{firstSeq: int32(r.Varint()), lastSeq: int32(r.Varint()), offset: r.Uvarint()})
	}
	return p, r.Done()
}

// txnState is a transactional id's durable state, in its coordinator's
// group. Its records and offsets are staged in the groups holding their
// partitions (KafkaStageCmd), and groups says which.
type txnState struct {
	producerID    int64
	epoch         int16
	ongoing       bool
	txnSeq        uint64 // the current (ongoing) or last transaction's number
	lastCommitted bool   // how transaction txnSeq ended, when not ongoing
	beganMs       int64
	timeoutMs     uint32
	lastInitReq   wire.ID
	// groups are the raft groups the open (or last) transaction staged
	// records or offsets in (bit g): EndTxn resolves each.
	groups uint64
	// unsettled is the xid of the last transaction, ended (at endedMs)
	// but not yet known to be resolved in every group of groups: the id
	// begins no new transaction until a TxnSettledCmd clears it.
	unsettled wire.ID
	endedMs   int64
	// reinit: an InitProducerId came after the last transaction ended
	// (from FormatV8; the next begin clears it), which Kafka shows as
	// Empty rather than how that transaction ended.
	reinit bool
}

// end ends the ongoing transaction, committed or not. With settle (from
// FormatV2) it is unsettled until every group it staged in has resolved
// it.
func (t *txnState) end(tenant wire.ID, txnID string, commit bool, nowMs int64, settle bool) {
	if settle {
		t.unsettled, t.endedMs = KafkaTxnXID(txnInfo(txnKeyT{tenant, txnID}, t)), nowMs
	}
	t.ongoing, t.lastCommitted = false, commit
}

func (t *txnState) encode() []byte {
	w := wire.Writer{B: make([]byte, 0, 64)}
	w.Varint(t.producerID)
	w.Varint(int64(t.epoch))
	w.Bool(t.ongoing)
	w.Uvarint(t.txnSeq)
	w.Bool(t.lastCommitted)
	w.Varint(t.beganMs)
	w.Uvarint(uint64(t.timeoutMs))
	w.Fixed(t.lastInitReq[:])
	w.U64(t.groups)
	// Optional tails: states without the first read as settled, without
	// the second (FormatV8's, written only when set) as not reinit.
	if !t.unsettled.IsZero() || t.reinit {
		w.Fixed(t.unsettled[:])
		w.Varint(t.endedMs)
	}
	if t.reinit {
		w.Bool(true)
	}
	return w.B
}

func decodeTxnState(b []byte) (*txnState, error) {
	r := wire.NewReader(b)
	t := &txnState{producerID: r.Varint(), epoch: int16(r.Varint()), ongoing: r.Bool(), txnSeq: r.Uvarint(),
		lastCommitted: r.Bool(), beganMs: r.Varint(), timeoutMs: uint32(r.Uvarint())}
	copy(t.lastInitReq[:], r.Fixed(16))
	t.groups = r.U64()
	if r.Len() > 0 {
		copy(t.unsettled[:], r.Fixed(16))
		t.endedMs = r.Varint()
	}
	if r.Len() > 0 {
		t.reinit = r.Bool()
	}
	return t, r.Done()
}

// topicMeta is what Kafka remembers of a topic it created: the configs set
// on it (sorted by name), what they make queen do (parsed once: produce and
// fetch read it), and the request that created it.
type topicMeta struct {
	configs   []wire.ConfigEntry
	settings  wire.TopicSettings
	createReq wire.ID
}

// setConfigs replaces the topic's configs (sorted by name).
func (t *topicMeta) setConfigs(configs []wire.ConfigEntry) {
	t.configs, t.settings = configs, wire.ParseTopicSettings(configs)
}

func (t *topicMeta) encode() []byte {
	w := wire.Writer{}
	w.Fixed(t.createReq[:])
	w.Uvarint(uint64(len(t.configs)))
	for _, c := range t.configs {
		w.String(c.Name)
		w.String(c.Value)
	}
	return w.B
}

func decodeTopicMeta(b []byte) (*topicMeta, error) {
	r := wire.NewReader(b)
	t := &topicMeta{}
	copy(t.createReq[:], r.Fixed(16))
	n := r.Count(wire.MaxTopicConfigs, 2)
	var configs []wire.ConfigEntry
	for range n {
		configs = append(configs, wire.ConfigEntry{Name: r.String(), Value: r.String()})
	}
	t.setConfigs(configs)
	return t, r.Done()
}

func sortConfigs(cs []wire.ConfigEntry) {
	slices.SortFunc(cs, func(a, b wire.ConfigEntry) int { return cmp.Compare(a.Name, b.Name) })
}

// loadKafka rebuilds the Kafka state from the database (Open and after a
// snapshot). Producer states of partitions that no longer exist (their queue
// was deleted over HTTP) are skipped.
func (s *Store) loadKafka() error {
	k := &s.kafka
	*k = kafkaState{
		nodes:          map[uint64]string{},
		memberAddrs:    map[uint64]string{},
		nextProducerID: 1,
		producers:      map[uint64]map[int64]*producerState{},
		txns:           map[txnKeyT]*txnState{},
		topics:         map[uint64]*topicMeta{},
		members:        map[txnKeyT]GroupMembers{},
		partTxns:       map[uint64]*partTxns{},
		nextExpiryMs:   math.MaxInt64,
	}
	err := s.scan([]byte{tagKafka}, func(key, v []byte) error {
		if len(key) < 2 {
			return fmt.Errorf("kafka key %x too short", key)
		}
		rest := key[2:]
		switch key[1] {
		case kafkaNode:
			if len(rest) == 8 {
				k.nodes[binary.BigEndian.Uint64(rest)] = string(v)
			}
		case kafkaMember:
			if len(rest) == 8 {
				k.memberAddrs[binary.BigEndian.Uint64(rest)] = string(v)
			}
		case kafkaCounters:
			r := wire.NewReader(v)
			k.nextProducerID = r.Varint()
			return r.Done()
		case kafkaProducer:
			if len(rest) != 16 {
				return fmt.Errorf("producer key %x", key)
			}
			pid := binary.BigEndian.Uint64(rest)
			if !s.partitionStored(pid) {
				return nil
			}
			st, err := decodeProducer(v)
			if err != nil {
				return fmt.Errorf("producer %x: %w", key, err)
			}
			k.putProducer(pid, int64(binary.BigEndian.Uint64(rest[8:])), st)
		case kafkaTxn:
			if len(rest) < 16 {
				return fmt.Errorf("txn key %x", key)
			}
			t, err := decodeTxnState(v)
			if err != nil {
				return fmt.Errorf("txn %x: %w", key, err)
			}
			k.txns[txnKeyT{wire.ID(rest[:16]), string(rest[16:])}] = t
		case kafkaTopic:
			if len(rest) != 8 {
				return fmt.Errorf("topic key %x", key)
			}
			t, err := decodeTopicMeta(v)
			if err != nil {
				return fmt.Errorf("topic %x: %w", key, err)
			}
			k.topics[binary.BigEndian.Uint64(rest)] = t
		case kafkaPartTxns, kafkaPartSkip, kafkaPartAborted:
			if len(rest) < 8 || (key[1] != kafkaPartTxns && len(rest) != 16) {
				return fmt.Errorf("partition transactions key %x", key)
			}
			pid := binary.BigEndian.Uint64(rest)
			if !s.partitionStored(pid) {
				return nil
			}
			if err := k.loadPartTxn(key[1], pid, rest[8:], v); err != nil {
				return fmt.Errorf("partition transactions %x: %w", key, err)
			}
		case kafkaMembers:
			if len(rest) < 16 {
				return fmt.Errorf("members key %x", key)
			}
			m, err := decodeGroupMembers(v)
			if err != nil {
				return fmt.Errorf("members %x: %w", key, err)
			}
			k.members[txnKeyT{wire.ID(rest[:16]), string(rest[16:])}] = m
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: load kafka: %w", err)
	}
	s.noteTxns()
	return nil
}

func (k *kafkaState) putProducer(pid uint64, producer int64, st *producerState) {
	m := k.producers[pid]
	if m == nil {
		m = map[int64]*producerState{}
		k.producers[pid] = m
	}
	m[producer] = st
	k.nextExpiryMs = min(k.nextExpiryMs, st.lastMs+int64(st.ttlMs))
}

// producer returns a live producer state, nil when there is none or it
// expired (an expired state is as good as gone, swept or not).
func (k *kafkaState) producer(pid uint64, producer int64, nowMs int64) *producerState {
	st := k.producers[pid][producer]
	if st == nil || st.expired(nowMs) {
		return nil
	}
	return st
}

// forgetKafkaQueue drops the Kafka bookkeeping of a queue being deleted:
// its topic configs and the producer states of its partitions.
func (s *Store) forgetKafkaQueue(ctx *applyCtx, q *queueState) {
	for _, pid := range q.pids { // partitions with Kafka state never leave memory, but all are named here
		if pid == 0 {
			continue
		}
		if _, ok := s.kafka.producers[pid]; ok {
			prefix := producerPrefix(pid)
			_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
			delete(s.kafka.producers, pid)
		}
		if _, ok := s.kafka.partTxns[pid]; ok {
			delete(s.kafka.partTxns, pid)
			for _, kind := range []byte{kafkaPartTxns, kafkaPartSkip, kafkaPartAborted} {
				prefix := kafkaKey(kind, u64Bytes(pid))
				_ = ctx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
			}
			s.noteTxns()
		}
	}
	if _, ok := s.kafka.topics[q.id]; ok {
		delete(s.kafka.topics, q.id)
		ctx.del(topicKey(q.id))
	}
}

// kafkaProducerSweeper forgets producer states that expired. Expired states
// already behave as absent; sweeping only returns their memory and keys.
type kafkaProducerSweeper struct{}

func (kafkaProducerSweeper) name() string { return "kafka-producers" }

func (kafkaProducerSweeper) due(s *Store, nowMs int64) bool { return nowMs >= s.kafka.nextExpiryMs }

func (kafkaProducerSweeper) sweep(s *Store, ctx *applyCtx) {
	k := &s.kafka
	if ctx.nowMs < k.nextExpiryMs {
		return
	}
	next := int64(math.MaxInt64)
	// Sorted, so every replica writes its deletes in the same order.
	for _, pid := range slices.Sorted(maps.Keys(k.producers)) {
		m := k.producers[pid]
		for _, producer := range slices.Sorted(maps.Keys(m)) {
			st := m[producer]
			if st.expired(ctx.nowMs) {
				delete(m, producer)
				ctx.del(producerKey(pid, producer))
				continue
			}
			next = min(next, st.lastMs+int64(st.ttlMs))
		}
		if len(m) == 0 {
			delete(k.producers, pid)
		}
	}
	k.nextExpiryMs = next
}

// evictOldestProducer makes room in a partition that holds the most producer
// states allowed: the least recently active goes (ties: the lowest id).
func (s *Store) evictOldestProducer(ctx *applyCtx, pid uint64) {
	m := s.kafka.producers[pid]
	var victim int64
	var oldest *producerState
	for id, st := range m {
		if oldest == nil || st.lastMs < oldest.lastMs || (st.lastMs == oldest.lastMs && id < victim) {
			victim, oldest = id, st
		}
	}
	if oldest != nil {
		delete(m, victim)
		ctx.del(producerKey(pid, victim))
	}
}

// nodeAddrs is a sorted copy of the registry.
func (k *kafkaState) nodeAddrs() []NodeAddr {
	out := make([]NodeAddr, 0, len(k.nodes))
	for id, addr := range k.nodes {
		out = append(out, NodeAddr{ID: id, KafkaAddr: addr})
	}
	slices.SortFunc(out, func(a, b NodeAddr) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
