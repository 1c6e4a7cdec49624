package broker

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// maxFetchWait bounds a fetch's long poll whatever MaxWaitMillis says.
const maxFetchWait = 30 * time.Second

// handleFetch is a read at an offset without a lease (spec decision 1):
// each partition from the local store of the raft group holding it, which
// this node must lead, below its committed high-water mark: batches kept
// as produced as they are, other chunks encoded as one batch each. With
// MinBytes it parks until that much is there or MaxWaitMillis passes, woken
// by the apply loop (Engine.Changed) instead of polling. read_uncommitted
// reads to the high-water mark, aborted transactions and markers included;
// read_committed stops at the last stable offset (the first offset of a
// transaction still open) and gets the aborted transactions it reads over.
//
// Fetch sessions (v7+, KIP-227) are declined, as KIP-227 lets a broker do:
// every answer has session id 0, so clients keep sending full fetches. v9
// adds the leader epoch the client believes current, checked per
// partition as Kafka does.
func (b *Broker) handleFetch(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	tenant := b.tenantOf(c)
	if err := checkFetchSession(req); err != nil {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	limit := b.cfg.FetchMaxBytes
	if req.MaxBytes > 0 {
		limit = min(limit, int(req.MaxBytes))
	}
	deadline := time.Now().Add(min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait))
	for i := range req.Topics {
		t := &req.Topics[i]
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i].Partition })
	}
	for {
		// Listen before reading, so a commit between the read and the
		// wait still wakes us.
		var changed []<-chan struct{}
		var releases []func()
		if req.MinBytes > 0 && time.Now().Before(deadline) {
			for _, t := range req.Topics {
				ch, release := b.engine.Changed(tenant, t.Topic)
				changed, releases = append(changed, ch), append(releases, release)
			}
		}
		resp, n, failed := b.readFetch(tenant, req, limit)
		if n >= int(req.MinBytes) || failed || len(changed) == 0 || ctx.Err() != nil || !time.Now().Before(deadline) {
			for _, release := range releases {
				release()
			}
			return resp, nil
		}
		waitAny(ctx, changed, deadline)
		for _, release := range releases {
			release()
		}
	}
}

// checkFetchSession refuses what only a session could mean: an incremental
// fetch of a session id (none is ever granted), or a session epoch past the
// first without one. Session id 0 with epoch 0 (asking for a session) or -1
// (a full fetch without one) is a full fetch.
func checkFetchSession(req *kmsg.FetchRequest) error {
	switch {
	case req.Version < 7:
		return nil
	case req.SessionID != 0:
		return fmt.Errorf("%w: %d", errNoFetchSession, req.SessionID)
	case req.SessionEpoch > 0:
		return fmt.Errorf("%w: epoch %d", errFetchSessionEpoch, req.SessionEpoch)
	}
	return nil
}

// waitAny parks until one of chans closes, the deadline passes or ctx ends.
func waitAny(ctx context.Context, chans []<-chan struct{}, deadline time.Time) {
	defer parkedSince(ctx, time.Now()) // not handler time for request_percentage
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, ch := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	reflect.Select(cases)
}

// readFetch reads every requested partition once. It returns the response,
// the record bytes in it, and whether a partition failed (a fetch answers at
// once then).
func (b *Broker) readFetch(tenant wire.ID, req *kmsg.FetchRequest, limit int) (*kmsg.FetchResponse, int, bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	total, failed := 0, false
	var scratch []records.Record
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		set, _ := b.engine.TopicSettings(tenant, t.Topic)
		for pi := range t.Partitions {
			fp := &t.Partitions[pi]
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewFetchResponseTopicPartition()
			// Empty, not null: librdkafka refuses a null record set.
			rp.Partition, rp.RecordBatches = fp.Partition, []byte{}
			budget := min(int(fp.PartitionMaxBytes), limit-total)
			// The first records of a response go out even when larger
			// than the limits, so a big record cannot wedge a consumer
			// (KIP-74).
			var n int
			var err error
			n, scratch, err = b.fetchPartition(tenant, t.Topic, set.LogAppendTime, req.IsolationLevel == 1, fp, rp, budget, total == 0, scratch)
			total += n
			if err != nil {
				rp.ErrorCode = errorCode(err)
				failed = true
			}
		}
	}
	return resp, total, failed
}

// fetchPartition fills rp with the records of one partition from the fetch
// offset, within budget bytes (at least one record when force), when this
// node leads the partition. With appendTime (a LogAppendTime topic) each
// batch says so and carries its chunk's append time as MaxTimestamp, which
// Kafka readers take as every record's timestamp. It returns the bytes it
// added and the scratch slice for reuse.
func (b *Broker) fetchPartition(tenant wire.ID, topic string, appendTime, committed bool, fp *kmsg.FetchRequestTopicPartition,
	rp *kmsg.FetchResponseTopicPartition, budget int, force bool, scratch []records.Record) (int, []records.Record, error) {
	if isInternalTopic(topic) {
		return 0, scratch, b.fetchInternal(tenant, fp, rp)
	}
	p, ok := b.partition(tenant, topic, fp.Partition)
	if !ok {
		return 0, scratch, wire.ErrPartitionNotFound
	}
	_, caughtUp, err := b.leadingAt(p.group, p.epochBase, fp.CurrentLeaderEpoch)
	if err != nil {
		return 0, scratch, err
	}
	hwm, start := p.HighWatermark(), p.LogStart()
	from := fp.FetchOffset
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = int64(hwm), int64(hwm), int64(start)
	switch {
	case from < int64(start):
		return 0, scratch, errOffsetOutOfRange
	case from > int64(hwm) && !caughtUp:
		// A new leader's high-water mark may trail what the previous
		// one served; out of range would make the client reset.
		return 0, scratch, errNotCaughtUp
	case from > int64(hwm):
		return 0, scratch, errOffsetOutOfRange
	}
	fb := fetchBatches{b: b, from: uint64(from), hwm: hwm, budget: budget, force: force, appendTime: appendTime, scratch: scratch}
	if committed {
		// read_committed: nothing past the last stable offset, and the
		// aborted transactions the records read overlap, for the client
		// to drop their batches.
		txns := p.Store().Txns(p.Partition, uint64(from), hwm)
		fb.hwm, fb.txns = txns.LastStable, &txns
		for _, a := range txns.Aborted {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, int64(a.First)
			rp.AbortedTransactions = append(rp.AbortedTransactions, at)
		}
		rp.LastStableOffset = int64(txns.LastStable)
	} else {
		rp.LastStableOffset = int64(p.Store().LastStable(p.Partition, hwm))
	}
	if from >= int64(fb.hwm) || (budget <= 0 && !force) {
		return 0, scratch, nil
	}
	_, err = p.Store().ReadChunks(p.Partition, uint64(from), fb.add)
	if err == nil {
		err = fb.err
	}
	scratch = fb.scratch
	if err != nil {
		return 0, scratch, err
	}
	if fb.out == nil {
		return 0, scratch, nil
	}
	rp.RecordBatches = fb.out[fetchHeadroom:]
	return len(rp.RecordBatches), scratch, nil
}

// fetchBatches builds one partition's record batches from its chunks: a
// chunk keeping a batch as produced goes out as it is, with its base offset
// set (a fetch from the middle of it gets the whole batch, as from Kafka:
// clients skip the records before their offset); a chunk of stored records
// is encoded as one batch of the records from the fetch offset.
type fetchBatches struct {
	b          *Broker
	from, hwm  uint64
	budget     int
	force      bool // the first records of the response: sent even past the budget
	appendTime bool
	out        []byte
	used       int
	scratch    []records.Record
	err        error
	// txns: a read_committed fetch, which leaves out the records of
	// aborted transactions that stored records hold (kept batches carry
	// their producer, and the client drops them by the aborted list).
	txns *storage.TxnView
}

// add adds one chunk; false stops the read (the budget is spent or a record
// failed).
func (f *fetchBatches) add(c *storage.StoredChunk) bool {
	if c.KafkaBatch {
		if c.Base >= f.hwm {
			return false // committed after the high-water mark this answer gives
		}
		n := c.KafkaBatchSize()
		if f.used+n > f.budget && (f.used > 0 || !f.force) {
			return false
		}
		// Sized for what the read will likely take: the budget, or less
		// when the partition holds less past this chunk (at its bytes per
		// record), so the answer neither grows by copying nor zeroes room
		// it never fills.
		f.grow(max(n, int(min(uint64(f.budget), (f.hwm-c.Base)*uint64(n)/uint64(max(c.Count, 1))))))
		at := len(f.out)
		if f.out, f.err = c.AppendKafkaBatch(f.out); f.err != nil {
			return false
		}
		records.SetBaseOffset(f.out[at:], int64(c.Base), -1)
		f.used += n
		return true
	}
	recs, err := c.Records()
	if err != nil {
		f.err = err
		return false
	}
	f.scratch = f.scratch[:0]
	first, full := uint64(0), false
	it := wire.NewRecordIter(recs)
	for off := c.Base; ; off++ {
		body, _, ok := it.Next()
		if !ok || off >= f.hwm {
			break
		}
		if off < f.from || (f.txns != nil && f.txns.Skipped(off)) {
			continue
		}
		if f.used+len(body) > f.budget && (f.used > 0 || len(f.scratch) > 0 || !f.force) {
			full = true
			break
		}
		rec, err := wire.ParseRecord(body)
		if err != nil {
			f.err = err
			return false
		}
		f.b.engine.OpenRecord(&rec)
		if len(f.scratch) == 0 {
			first = off
		}
		f.scratch = append(f.scratch, fetchRecord(&rec, c.AppendMs, int32(off-first)))
		f.used += len(body)
	}
	if len(f.scratch) > 0 {
		f.grow(min(f.budget, 1<<20) + records.HeaderSize)
		opts := records.NewBatchOptions(int64(first))
		if f.appendTime {
			opts.TimestampType, opts.LogAppendTime = records.LogAppendTime, c.AppendMs
		}
		f.out, f.err = records.AppendBatch(f.out, opts, f.scratch)
	}
	return f.err == nil && !full
}

// fetchHeadroom is the room a partition's answer keeps before its first
// batch, which StoredChunk.AppendKafkaBatch reads a chunk's header into.
const fetchHeadroom = wire.KafkaBatchHeaderSize

// grow gives the answer its buffer, of room for size bytes, at its first
// batch.
func (f *fetchBatches) grow(size int) {
	if f.out == nil {
		f.out = make([]byte, fetchHeadroom, fetchHeadroom+size)
	}
}

// fetchInternal answers a fetch of an internal topic's partition, which
// holds no records (internal_topics.go), at the leader of the raft group
// it stands for: empty, both ends 0.
func (b *Broker) fetchInternal(tenant wire.ID, fp *kmsg.FetchRequestTopicPartition, rp *kmsg.FetchResponseTopicPartition) error {
	groups := internalTopicGroups(b.engine, tenant)
	if fp.Partition < 0 || int(fp.Partition) >= len(groups) {
		return wire.ErrPartitionNotFound
	}
	if _, _, err := b.leading(groups[fp.Partition], fp.CurrentLeaderEpoch); err != nil {
		return err
	}
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 0, 0, 0
	if fp.FetchOffset != 0 {
		return errOffsetOutOfRange
	}
	return nil
}
