package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The transaction coordinator. A transaction's records and offsets are
// staged here, in the memory of the node coordinating its transactional id
// (the leader of the raft group the id hashes onto, Engine.TxnCoordinator),
// bounded per transaction and in total, and reach the logs only when the
// transaction commits (spec §3.3): in one raft entry when its partitions
// and the id share a raft group, by the engine's two-phase commit when they
// span groups. An aborted transaction writes nothing, so no consumer,
// Kafka read_committed or not, or HTTP, ever sees its records.
//
// The durable side is small: each transactional id's producer id, epoch and
// whether a transaction is open (storage's txnState, in the id's raft
// group). When leadership of that group moves, the staged records stay
// behind on the old leader and are lost; the new leader sees the
// transaction open but has nothing staged for it, aborts it and fences the
// producer's epoch, so the client's next AddPartitionsToTxn, produce or
// EndTxn gets INVALID_PRODUCER_EPOCH and it aborts and starts over
// (franz-go and KIP-588 clients re-initialise on their own). A commit never
// succeeds with part of a transaction.

type txnKey struct {
	tenant wire.ID
	id     string
}

type partKey struct {
	topic     string
	partition int32
}

type offsetKey struct {
	group, topic string
	partition    int32
}

// stagedPart is what a transaction has produced to one partition.
type stagedPart struct {
	records []byte // stored form (wire.AppendRecord)
	count   int
	batches []wire.SeqBatch
	nextSeq int32
	seqSet  bool // nextSeq is known (from the store or a staged batch)
}

// staged is one open transaction.
type staged struct {
	key        txnKey
	producerID int64
	epoch      int16
	txnSeq     uint64
	term       uint64 // the coordinator's term (of the id's raft group) when it began
	timeout    time.Duration
	began      time.Time

	ending atomic.Bool // an EndTxn holds it: nothing more is staged
	bytes  int         // staged bytes, guarded by the coordinator's mu

	mu      sync.Mutex // guards what follows
	parts   map[partKey]*stagedPart
	order   []partKey
	groups  map[string]bool
	offsets map[offsetKey]wire.TxnOffset
}

// coordinator stages the transactions this node coordinates. Lock order:
// a staged transaction's mu, then the coordinator's.
type coordinator struct {
	b     *Broker
	mu    sync.Mutex
	txns  map[txnKey]*staged
	bytes int // staged across every transaction
}

func newCoordinator(b *Broker) *coordinator {
	return &coordinator{b: b, txns: map[txnKey]*staged{}}
}

// coordinates reports whether this node coordinates the transactional id
// of key (it leads the id's raft group), and in which term.
func (c *coordinator) coordinates(key txnKey) (term uint64, ok bool) {
	node, term, ok := c.b.engine.TxnCoordinator(key.tenant, key.id)
	return term, ok && node == uint64(c.b.cfg.NodeID)
}

// coordinatesTxn reports whether this node coordinates a transactional id
// of tenant, so may answer the transaction APIs for it.
func (b *Broker) coordinatesTxn(tenant wire.ID, id string) bool {
	_, ok := b.txns.coordinates(txnKey{tenant, id})
	return ok
}

// current returns the open transaction of key staged on this node, when it
// is still good: this node still coordinates the id in the term it began
// in. A stale one is dropped.
func (c *coordinator) current(key txnKey) *staged {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.txns[key]
	if s == nil {
		return nil
	}
	if term, ok := c.coordinates(key); !ok || term != s.term {
		c.dropLocked(s)
		return nil
	}
	return s
}

func (c *coordinator) drop(s *staged) {
	c.mu.Lock()
	c.dropLocked(s)
	c.mu.Unlock()
}

func (c *coordinator) dropLocked(s *staged) {
	if c.txns[s.key] != s {
		return
	}
	delete(c.txns, s.key)
	c.bytes -= s.bytes
	s.bytes = 0
}

// dropKey forgets whatever is staged for key (InitProducerId fences it).
func (c *coordinator) dropKey(key txnKey) {
	c.mu.Lock()
	if s := c.txns[key]; s != nil {
		c.dropLocked(s)
	}
	c.mu.Unlock()
}

// begin returns the open transaction of a producer, opening one (durably:
// TxnBegin) when it has none. A transaction the store says is open but that
// is not staged here was lost: it is aborted, the producer fenced, and
// errTxnLost returned.
func (c *coordinator) begin(ctx context.Context, key txnKey, producerID int64, epoch int16) (*staged, error) {
	if s := c.current(key); s != nil {
		if s.producerID != producerID || s.epoch != epoch {
			return nil, wire.ErrFenced
		}
		return s, nil
	}
	info, err := c.durable(key, producerID, epoch)
	if err != nil {
		return nil, err
	}
	if info.Ongoing {
		return nil, c.abortLost(ctx, info)
	}
	term, ok := c.coordinates(key)
	if !ok {
		return nil, errNotTxnCoordinator
	}
	res, err := c.b.engine.TxnBegin(ctx, &wire.TxnBeginCmd{Tenant: key.tenant, TxnID: key.id, ProducerID: producerID, Epoch: epoch})
	if err == nil {
		err = res.Code.Err()
	}
	if err != nil {
		return nil, err
	}
	s := &staged{key: key, producerID: producerID, epoch: epoch, txnSeq: res.TxnSeq, term: term,
		timeout: time.Duration(info.TimeoutMs) * time.Millisecond, began: time.Now(),
		parts: map[partKey]*stagedPart{}, groups: map[string]bool{}, offsets: map[offsetKey]wire.TxnOffset{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.txns[key]; old != nil {
		// A concurrent request of the same producer began it first.
		if old.txnSeq == s.txnSeq && old.epoch == epoch {
			return old, nil
		}
		c.dropLocked(old)
	}
	c.txns[key] = s
	return s, nil
}

// durable reads a transactional id's state and checks the producer id and
// epoch a request names against it.
func (c *coordinator) durable(key txnKey, producerID int64, epoch int16) (info storage.TxnInfo, err error) {
	i, ok := c.b.engine.KafkaTxn(key.tenant, key.id)
	switch {
	case !ok || i.ProducerID != producerID:
		return info, wire.ErrNotFound
	case i.Epoch != epoch:
		return info, wire.ErrFenced
	}
	return i, nil
}

// abortLost ends a transaction whose staged records are gone: aborted, and
// the producer fenced so it knows.
func (c *coordinator) abortLost(ctx context.Context, info storage.TxnInfo) error {
	_, err := c.b.engine.TxnEnd(ctx, &wire.TxnEndCmd{Tenant: info.Tenant, TxnID: info.TxnID, ProducerID: info.ProducerID,
		Epoch: info.Epoch, TxnSeq: info.TxnSeq, BumpEpoch: true})
	if err != nil && !errors.Is(err, wire.ErrConflict) && !errors.Is(err, wire.ErrFenced) {
		return err
	}
	c.b.log.Info("kafka: aborted a transaction whose staged records were lost", "transactional_id", info.TxnID,
		"producer_id", info.ProducerID, "epoch", info.Epoch)
	return errTxnLost
}

// stage adds a produce's transactional batches for one partition, checking
// the producer, that the partition was added, the sequences and the memory
// bounds. A batch already staged (a client retry) is accepted again without
// being stored twice. Only the transactional id's coordinator stages: a
// node that is not would find the transaction open but not staged and
// abort it.
func (c *coordinator) stage(ctx context.Context, tenant wire.ID, txnID, topic string, partition int32, batches []records.Batch, seal bool) error {
	key := txnKey{tenant, txnID}
	if _, ok := c.coordinates(key); !ok {
		return errNotTxnCoordinator
	}
	s := c.current(key)
	if s == nil {
		info, err := c.durable(key, batches[0].ProducerID, batches[0].ProducerEpoch)
		switch {
		case err != nil:
			return err
		case info.Ongoing:
			return c.abortLost(ctx, info)
		}
		return errTxnNotAdded
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.parts[partKey{topic, partition}]
	switch {
	case s.ending.Load():
		return errTxnState
	case sp == nil:
		return errTxnNotAdded
	}
	for i := range batches {
		bt := &batches[i]
		if bt.ProducerID != s.producerID || bt.ProducerEpoch != s.epoch {
			return wire.ErrFenced
		}
		if !sp.seqSet {
			sp.nextSeq, sp.seqSet = c.storedNextSeq(tenant, topic, partition, s), true
		}
		if slices.Contains(sp.batches, wire.SeqBatch{BaseSeq: bt.BaseSequence, Count: uint32(len(bt.Records))}) {
			continue
		}
		if bt.BaseSequence != sp.nextSeq {
			return wire.ErrOutOfOrder
		}
		size := storedSize(bt)
		if err := c.reserve(s, size); err != nil {
			return err
		}
		before := len(sp.records)
		recs, err := c.b.appendStored(sp.records, bt, seal)
		if err != nil {
			c.adjust(s, -size)
			return err
		}
		sp.records = recs
		c.adjust(s, len(sp.records)-before-size)
		sp.count += len(bt.Records)
		sp.batches = append(sp.batches, wire.SeqBatch{BaseSeq: bt.BaseSequence, Count: uint32(len(bt.Records))})
		sp.nextSeq = wire.NextSeq(bt.BaseSequence, len(bt.Records))
	}
	return nil
}

// storedNextSeq is the sequence a producer's next batch to a partition must
// carry: after its last committed one in this epoch, else 0. The
// producer's state is the partition's, in the partition's raft group.
func (c *coordinator) storedNextSeq(tenant wire.ID, topic string, partition int32, s *staged) int32 {
	p, ok := c.b.partition(tenant, topic, partition)
	if !ok {
		return 0
	}
	if st, ok := p.Store().KafkaProducer(p.Partition, s.producerID); ok && st.Epoch == s.epoch {
		return wire.NextSeq(st.LastSeq, 1)
	}
	return 0
}

// reserve takes n bytes of staging memory for s (s.mu held).
func (c *coordinator) reserve(s *staged, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case s.bytes+n > c.b.cfg.TxnMaxBytes:
		return errTxnTooLarge
	case c.bytes+n > c.b.cfg.TxnBufferBytes:
		return errTxnBufferFull
	}
	s.bytes += n
	c.bytes += n
	return nil
}

// adjust corrects a reservation by delta bytes (s.mu held).
func (c *coordinator) adjust(s *staged, delta int) {
	c.mu.Lock()
	s.bytes += delta
	c.bytes += delta
	c.mu.Unlock()
}

// end commits or aborts a producer's transaction.
func (c *coordinator) end(ctx context.Context, key txnKey, producerID int64, epoch int16, commit bool) error {
	s := c.current(key)
	if s == nil {
		return c.endUnstaged(ctx, key, producerID, epoch, commit)
	}
	if s.producerID != producerID || s.epoch != epoch {
		return wire.ErrFenced
	}
	if !s.ending.CompareAndSwap(false, true) {
		return errTxnState
	}
	s.mu.Lock()
	cmd := wire.TxnEndCmd{Tenant: key.tenant, TxnID: key.id, ProducerID: producerID, Epoch: epoch, TxnSeq: s.txnSeq,
		Commit: commit, StateTTLMs: uint32(c.b.cfg.DedupWindow.Milliseconds())}
	cmd.Pushes, cmd.Offsets = s.commitContents(commit)
	s.mu.Unlock()
	res, err := c.b.engine.TxnEnd(ctx, &cmd)
	if errors.Is(err, raftgroups.ErrNoLeader) || errors.Is(err, raftgroups.ErrOverloaded) {
		// Never proposed: the client may retry the same end.
		s.ending.Store(false)
		return err
	}
	c.drop(s)
	switch {
	case err != nil:
		return err
	case res.Code == wire.CodePartitionNotFound || res.Code == wire.CodeBadRequest:
		return fmt.Errorf("%w: a partition it wrote to is gone", errTxnLost)
	}
	return res.Code.Err()
}

// commitContents lays the transaction out for its TxnEnd: partitions in
// the order they were added, offsets sorted. An abort carries only the
// batches, for the sequences (s.mu held).
func (s *staged) commitContents(commit bool) ([]wire.TxnPush, []wire.TxnOffset) {
	var pushes []wire.TxnPush
	for _, k := range s.order {
		sp := s.parts[k]
		if sp.count == 0 {
			continue
		}
		push := wire.TxnPush{Queue: k.topic, PartitionIndex: uint32(k.partition), Batches: sp.batches}
		if commit {
			push.Count, push.Records = sp.count, sp.records
		}
		pushes = append(pushes, push)
	}
	if !commit {
		return pushes, nil
	}
	offsets := make([]wire.TxnOffset, 0, len(s.offsets))
	for _, o := range s.offsets {
		offsets = append(offsets, o)
	}
	slices.SortFunc(offsets, func(a, b wire.TxnOffset) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.PartitionIndex, b.PartitionIndex))
	})
	return pushes, offsets
}

// endUnstaged answers an EndTxn for a transaction with nothing staged here:
// the retry of an end that completed, or a transaction lost with a leader.
func (c *coordinator) endUnstaged(ctx context.Context, key txnKey, producerID int64, epoch int16, commit bool) error {
	info, err := c.durable(key, producerID, epoch)
	switch {
	case err != nil:
		return err
	case !info.Ongoing && info.LastCommitted == commit && info.TxnSeq > 0:
		return nil // it already ended this way
	case !info.Ongoing:
		return errTxnState
	}
	// Open but not staged here: lost, with the sequences of its batches,
	// so even an abort fences the producer to restart them.
	return c.abortLost(ctx, info)
}

// reapEvery is how often the coordinator looks for stale transactions.
const reapEvery = time.Second

// reap aborts transactions past their timeout, as Kafka's coordinator does,
// and drops staging this node no longer coordinates. Open transactions that
// began under another leader are aborted once past their timeout too.
func (c *coordinator) reap() {
	defer c.b.wg.Done()
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-c.b.ctx.Done():
			return
		case <-t.C:
		}
		c.reapOnce(time.Now())
	}
}

func (c *coordinator) reapOnce(now time.Time) {
	c.mu.Lock()
	var expired []*staged
	staged := map[txnKey]bool{}
	for k, s := range c.txns {
		switch term, ok := c.coordinates(k); {
		case !ok || term != s.term:
			c.dropLocked(s)
		case !s.ending.Load() && now.Sub(s.began) > s.timeout:
			expired = append(expired, s)
			c.dropLocked(s)
		default:
			staged[k] = true
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.b.ctx, 10*time.Second)
	defer cancel()
	for _, s := range expired {
		c.b.log.Info("kafka: aborting a transaction past its timeout", "transactional_id", s.key.id, "timeout", s.timeout)
		_, _ = c.b.engine.TxnEnd(ctx, &wire.TxnEndCmd{Tenant: s.key.tenant, TxnID: s.key.id, ProducerID: s.producerID,
			Epoch: s.epoch, TxnSeq: s.txnSeq, BumpEpoch: true})
	}
	for _, info := range c.b.engine.LedOpenTxns() {
		deadline := time.UnixMilli(info.BeganMs).Add(time.Duration(info.TimeoutMs) * time.Millisecond)
		if staged[txnKey{info.Tenant, info.TxnID}] || now.Before(deadline) {
			continue
		}
		_ = c.abortLost(ctx, info)
	}
}
