package broker

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/wire"
)

// A share group's records are acquired and acknowledged through the same
// engine calls as an HTTP pop and ack of the Queen consumer group named
// like the share group: acquiring is a pop with a lease of the
// acquisition lock timeout, and each acknowledgement type is an ack
// status (ShareAcknowledge "accept" completes, "release" fails the
// delivery, so it comes back with its delivery count raised and goes to
// the dead-letter queue past the queue's retryLimit, "reject" dead-letters
// it). Records acquired and never acknowledged come back when the lease
// expires, as an HTTP consumer's do.

// shareLockTimeout is the acquisition lock timeout, Kafka's
// group.share.record.lock.duration.ms default.
const shareLockTimeout = 30 * time.Second

// shareSettings is what a share group's configs (group_configs.go) make
// of its fetches: the acquisition lock timeout, and where the group starts
// on a queue it has never read (share.auto.offset.reset; a group an HTTP
// pop subscribed first keeps the mode that pop chose).
type shareSettings struct {
	lock    time.Duration
	subMode uint8
}

func (b *Broker) shareSettings(tenant wire.ID, group string) shareSettings {
	s := shareSettings{lock: shareLockTimeout, subMode: wire.SubAll}
	set, _, err := b.groupConfigs(tenant, group)
	if err != nil {
		return s
	}
	if v, err := strconv.Atoi(set["share.record.lock.duration.ms"]); err == nil {
		s.lock = time.Duration(v) * time.Millisecond
	}
	if set["share.auto.offset.reset"] == "latest" {
		s.subMode = wire.SubNew
	}
	return s
}

// Kafka's acknowledge types (KIP-932), and KIP-1222's renew.
const (
	ackGap     int8 = 0
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
	ackRenew   int8 = 4
)

// maxShareAckOffsets bounds the offsets one partition's acknowledgements
// may name in one request (one engine ack command).
const maxShareAckOffsets = wire.MaxAckItems

// shareAckBatch is one acknowledgement batch of either request kind.
type shareAckBatch struct {
	first, last int64
	types       []int8
}

// acquired is what one pop handed a share consumer from one partition.
type acquired struct {
	lease   shareLease
	records []byte
	ranges  []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	count   int
}

// shareAcquire leases up to limit records of partition p for group and
// encodes them as one record batch, with their delivery counts.
func (b *Broker) shareAcquire(ctx context.Context, tenant wire.ID, group string, set shareSettings, p cachedPartition, appendTime bool, limit int) (acquired, error) {
	cmd := wire.PopCmd{Tenant: tenant, Queue: p.Queue, Partition: p.Name, Group: group, Batch: uint32(limit),
		LeaseMs: uint32(set.lock / time.Millisecond), SubMode: set.subMode,
		LeaseIDs: []wire.ID{wire.ID(uuid.New())}}
	res, err := b.engine.Pop(ctx, &cmd)
	if err != nil {
		return acquired{}, err
	}
	switch res.Code {
	case wire.CodeOK:
	case wire.CodeQueueNotFound, wire.CodePartitionNotFound:
		return acquired{}, wire.ErrPartitionNotFound
	default:
		return acquired{}, res.Code.Err()
	}
	if len(res.Claims) == 0 {
		return acquired{}, nil
	}
	cl := res.Claims[0]
	out := acquired{lease: shareLease{cl.LeaseID, cl.From, cl.To}}
	var recs []records.Record
	var lastAppend int64
	var readErr error
	err = p.Store().ReadRange(p.Partition, cl.From, cl.To, func(off uint64, appendMs int64, body []byte) bool {
		rec, err := wire.ParseRecord(body)
		if err != nil {
			readErr = err
			return false
		}
		b.engine.OpenRecord(&rec)
		recs = append(recs, fetchRecord(&rec, appendMs, int32(off-cl.From)))
		lastAppend = appendMs
		count := int16(min(cl.DeliveryAttempt(off), 1<<15-1))
		if n := len(out.ranges); n > 0 && out.ranges[n-1].DeliveryCount == count && out.ranges[n-1].LastOffset == int64(off)-1 {
			out.ranges[n-1].LastOffset = int64(off)
		} else {
			r := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			r.FirstOffset, r.LastOffset, r.DeliveryCount = int64(off), int64(off), count
			out.ranges = append(out.ranges, r)
		}
		return true
	})
	if err == nil {
		err = readErr
	}
	if err != nil {
		return out, fmt.Errorf("kafka: share fetch of %s/%d: %w", p.Queue, p.Index, err)
	}
	if len(recs) == 0 {
		return out, nil
	}
	opts := records.NewBatchOptions(int64(cl.From))
	if appendTime {
		opts.TimestampType, opts.LogAppendTime = records.LogAppendTime, lastAppend
	}
	out.records, err = records.AppendBatch(nil, opts, recs)
	out.count = len(recs)
	return out, err
}

// shareAcknowledge applies one partition's acknowledgement batches for
// group, fenced by lease when it is known (zero: unfenced). It returns
// the partition's error code: INVALID_REQUEST for malformed batches,
// INVALID_RECORD_STATE when a record was not acquired (its lock timed
// out, or it was acknowledged already).
func (b *Broker) shareAcknowledge(ctx context.Context, tenant wire.ID, group string, lock time.Duration, p cachedPartition, lease wire.ID, batches []shareAckBatch) int16 {
	status, renew, kErr := shareAckStatuses(batches)
	if kErr != nil {
		return kErr.Code
	}
	if renew {
		if lease.IsZero() {
			return kerr.InvalidRecordState.Code
		}
		res, err := b.engine.ExtendLease(ctx, &wire.ExtendLeaseCmd{Tenant: tenant, LeaseID: lease, Ms: uint32(lock / time.Millisecond)})
		if err != nil || res.Code != wire.CodeOK {
			return kerr.InvalidRecordState.Code
		}
	}
	return b.applyShareAcks(ctx, tenant, group, p, lease, status)
}

// applyShareAcks acks records of p by offset: each offset's transaction
// id is read from the store, as the engine's acks name records by it.
func (b *Broker) applyShareAcks(ctx context.Context, tenant wire.ID, group string, p cachedPartition, lease wire.ID, status []offsetStatus) int16 {
	if len(status) == 0 {
		return 0
	}
	lo, hi := status[0].off, status[len(status)-1].off
	txns := make(map[uint64][]byte, len(status))
	var readErr error
	err := p.Store().ReadRange(p.Partition, lo, hi+1, func(off uint64, _ int64, body []byte) bool {
		h, err := wire.ParseRecordHead(body)
		if err != nil {
			readErr = err
			return false
		}
		if explicit, id := h.TxnKey(); explicit {
			txns[off] = append([]byte(nil), id...)
		} else {
			txns[off] = []byte(h.MsgID.String())
		}
		return true
	})
	if err != nil || readErr != nil {
		return kerr.KafkaStorageError.Code
	}
	cmd := wire.AckCmd{Tenant: tenant, Group: group}
	for _, s := range status {
		txn, ok := txns[s.off]
		if !ok {
			return kerr.InvalidRecordState.Code
		}
		cmd.Items = append(cmd.Items, wire.AckItem{PartitionID: p.ID, TxnID: txn, LeaseID: lease, Status: s.status,
			Error: "released or rejected by a Kafka share consumer"})
	}
	res, err := b.engine.AckGroups(ctx, tenant, []wire.AckCmd{cmd})
	if err != nil {
		return errorCode(err)
	}
	for _, o := range res[0].Items {
		if o.Code != wire.CodeOK && o.Code != wire.CodeNoop {
			return kerr.InvalidRecordState.Code
		}
	}
	return 0
}

// releaseShareSession hands back what a closing session still holds: the
// records of its leases not yet acknowledged are acked "retry", so they
// are delivered again at once without counting a failure (Kafka releases
// a member's acquired records when its session closes). Records
// acknowledged already, and leases that ended, are left as they are.
func (b *Broker) releaseShareSession(ctx context.Context, tenant wire.ID, group string, sess *shareSession, topics *shareTopics) {
	leases := map[tidp]shareLease{}
	b.shareSessions.update(func() { maps.Copy(leases, sess.leases) })
	for k, l := range leases {
		_, p, err := topics.partition(k)
		if err != nil || !b.leads(p) || l.to <= l.from || l.to-l.from > maxShareAckOffsets {
			continue
		}
		status := make([]offsetStatus, 0, l.to-l.from)
		for off := l.from; off < l.to; off++ {
			status = append(status, offsetStatus{off, wire.AckRetry})
		}
		b.applyShareAcks(ctx, tenant, group, p, l.id, status) // records no longer held answer INVALID_RECORD_STATE: nothing to release
	}
}

type offsetStatus struct {
	off    uint64
	status uint8
}

// shareAckStatuses turns acknowledgement batches into one ack status per
// offset, in ascending order, and reports whether a renewal was asked
// for. Batches must be ascending and not overlap, each with one type or
// one per offset, as Kafka requires.
func shareAckStatuses(batches []shareAckBatch) ([]offsetStatus, bool, *kerr.Error) {
	var out []offsetStatus
	renew := false
	next := int64(-1)
	for _, bt := range batches {
		n := bt.last - bt.first + 1
		switch {
		case bt.first < 0 || bt.first < next || n <= 0:
			return nil, false, kerr.InvalidRequest
		case len(bt.types) != 1 && int64(len(bt.types)) != n:
			return nil, false, kerr.InvalidRequest
		case int64(len(out))+n > maxShareAckOffsets:
			return nil, false, kerr.InvalidRequest
		}
		next = bt.last + 1
		for i := int64(0); i < n; i++ {
			t := bt.types[0]
			if len(bt.types) > 1 {
				t = bt.types[i]
			}
			var s uint8
			switch t {
			case ackGap, ackAccept:
				// A gap is an offset holding no record for the consumer
				// (a control record): done with, as an accepted one.
				s = wire.AckCompleted
			case ackRelease:
				s = wire.AckFailed
			case ackReject:
				s = wire.AckDLQ
			case ackRenew:
				renew = true
				continue
			default:
				return nil, false, kerr.InvalidRequest
			}
			out = append(out, offsetStatus{uint64(bt.first + i), s})
		}
	}
	return out, renew, nil
}
