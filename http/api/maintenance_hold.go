package api

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// The maintenance hold (docs/decisions.md, "Maintenance mode holds HTTP
// pushes in raft"). While push maintenance is on, an HTTP push is
// committed, whole, as one entry of the system tenant's KV namespace
// holdNS, keyed by its first message id (a UUIDv7 this node made, so keys
// sort in the order this node accepted the pushes), together with an
// increment of the held-items counter, in one raft command: the 201
// follows that commit, so a held push is as durable as a delivered one.
// Once the switch is off, the node leading the system tenant's KV group
// replays the entries in key order through the normal push path, each
// followed by a command deleting it (and decrementing the counter). A
// replay interrupted between the two (a crash, a leader change) is
// replayed again: every held record carries an explicit transaction id
// (its own message id when the client gave none), so the second push is
// answered as a duplicate and nothing is stored twice.
const (
	holdNS         = "queen-maintenance-hold"
	holdCounterKey = "maintenance.held"
	// holdBatch is how many held pushes one drain step reads (each is
	// replayed on its own, in order).
	holdBatch = 64
)

// holdState is what this node knows of its own drains, for bufferStats.
type holdState struct {
	mu        sync.Mutex
	delivered uint64
	lastError string
}

// holdStatsAnswer is bufferStats in GET /api/v1/system/maintenance.
type holdStatsAnswer struct {
	Pending   int64  `json:"pending"`
	Healthy   bool   `json:"healthy"`
	Delivered uint64 `json:"deliveredByThisNode"`
	LastError string `json:"lastError,omitempty"`
	Store     string `json:"store"`
	// Holding says whether this node sends pushes to the hold right now
	// (it follows the stored switch within maintPoll).
	Holding bool `json:"holdingOnThisNode"`
}

// heldCount is the number of items in the hold, as this node has applied.
func (s *Server) heldCount() int64 {
	b, ok := s.systemGet(holdCounterKey)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// holdPending says whether the hold has anything to deliver.
func (s *Server) holdPending() bool { return s.heldCount() > 0 }

func (s *Server) holdStats() holdStatsAnswer {
	s.maint.stats.mu.Lock()
	defer s.maint.stats.mu.Unlock()
	return holdStatsAnswer{Pending: s.heldCount(), Healthy: s.maint.stats.lastError == "",
		Delivered: s.maint.stats.delivered, LastError: s.maint.stats.lastError,
		Store: "raft: system tenant KV namespace " + holdNS, Holding: holding(s.engine)}
}

// holdPush answers a push made while maintenance holds pushes: its
// commands, their records given explicit transaction ids, are committed to
// the hold; each item is answered queued with its message id (its offset
// is known only once it is delivered). It reports false, having done
// nothing, when holding ended meanwhile: the push then goes to its queues.
func (s *Server) holdPush(ctx *fasthttp.RequestCtx, tenant wire.ID, items []pushItem, cmds []wire.PushCmd, ids []wire.ID) (bool, error) {
	s.maint.gate.RLock()
	defer s.maint.gate.RUnlock()
	if !holding(s.engine) {
		return false, nil
	}
	return true, s.commitHeld(ctx, tenant, items, cmds, ids)
}

// commitHeld commits a held push and answers it.
func (s *Server) commitHeld(ctx *fasthttp.RequestCtx, tenant wire.ID, items []pushItem, cmds []wire.PushCmd, ids []wire.ID) error {
	value, err := encodeHeld(tenant, cmds)
	if err != nil {
		return err
	}
	if s.engine.EncryptionEnabled() {
		// The hold may carry payloads of encrypted queues: sealed whole.
		if value, err = s.engine.SealText(value); err != nil {
			return err
		}
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.KV(rctx, &wire.KVCmd{Tenant: tenancy.SystemTenant, Ops: []wire.KVOp{
		{Op: wire.KVPutIfAbsent, NS: holdNS, Key: ids[0][:], Value: value, Required: true},
		{Op: wire.KVIncr, NS: systemNS, Key: []byte(holdCounterKey), Delta: int64(len(items)), Required: true},
	}})
	if err != nil {
		return err
	}
	if res.Code != wire.CodeOK || !res.OK {
		return fmt.Errorf("api: maintenance hold: %w", errHoldRefused)
	}
	answers := make([]pushAnswer, len(items))
	for i, it := range items {
		a := pushAnswer{Index: i, QueueName: it.Queue, Status: "queued", MessageID: ids[i].String(), TransactionID: it.TransactionID}
		if a.TransactionID == "" {
			a.TransactionID = a.MessageID
		}
		answers[i] = a
	}
	s.traffic.pushed(answers, len(ctx.PostBody()))
	writeJSON(ctx, http.StatusCreated, answers)
	return nil
}

var errHoldRefused = errors.New("the hold refused the push")

// encodeHeld encodes a held push: the tenant, then each command's queue,
// partition, record count and records, every record with an explicit
// transaction id so a replay of it is a duplicate.
func encodeHeld(tenant wire.ID, cmds []wire.PushCmd) ([]byte, error) {
	out := append([]byte(nil), tenant[:]...)
	out = binary.AppendUvarint(out, uint64(len(cmds)))
	for i := range cmds {
		c := &cmds[i]
		out = appendHeldString(out, c.Queue)
		out = appendHeldString(out, c.Partition)
		out = binary.AppendUvarint(out, uint64(c.Count))
		var recs []byte
		it := wire.NewRecordIter(c.Records)
		for {
			body, _, ok := it.Next()
			if !ok {
				break
			}
			rec, err := wire.ParseRecord(body)
			if err != nil {
				return nil, err
			}
			if rec.Flags&wire.FlagTxnID == 0 {
				rec.Flags |= wire.FlagTxnID
				rec.TxnID = []byte(rec.MsgID.String())
			}
			recs = wire.AppendRecord(recs, &rec)
		}
		out = binary.AppendUvarint(out, uint64(len(recs)))
		out = append(out, recs...)
	}
	return out, nil
}

func appendHeldString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errHeldCorrupt = errors.New("api: maintenance hold: an entry does not decode")

// heldReader reads encodeHeld's fields.
type heldReader struct{ b []byte }

func (r *heldReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, errHeldCorrupt
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *heldReader) bytes() ([]byte, error) {
	n, err := r.uvarint()
	if err != nil || n > uint64(len(r.b)) {
		return nil, errHeldCorrupt
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v, nil
}

// decodeHeld decodes an entry into its tenant, commands and item count.
func decodeHeld(b []byte) (wire.ID, []wire.PushCmd, int, error) {
	var tenant wire.ID
	if len(b) < len(tenant) {
		return tenant, nil, 0, errHeldCorrupt
	}
	copy(tenant[:], b)
	r := heldReader{b[len(tenant):]}
	n, err := r.uvarint()
	if err != nil || n > uint64(len(r.b)) {
		return tenant, nil, 0, errHeldCorrupt
	}
	cmds := make([]wire.PushCmd, 0, n)
	items := 0
	for range n {
		q, err1 := r.bytes()
		p, err2 := r.bytes()
		count, err3 := r.uvarint()
		recs, err4 := r.bytes()
		if err := errors.Join(err1, err2, err3, err4); err != nil || count > uint64(len(recs)) {
			return tenant, nil, 0, errHeldCorrupt
		}
		cmds = append(cmds, wire.PushCmd{Tenant: tenant, Queue: string(q), Partition: string(p), PartitionIndex: -1,
			Flags: wire.PushIndexTxn, Count: int(count), Records: recs})
		items += int(count)
	}
	return tenant, cmds, items, nil
}

// drainHold delivers up to holdBatch held pushes (at most holdBatchBytes
// of them, and at least one), oldest first, and returns how many it
// delivered. Their items are pushed together, merged per partition in
// hold order (so a partition's items keep their order and the drain
// outpaces the pushes it holds meanwhile), then their entries are released.
// Nothing is released when a push fails: it is all tried again, and what
// did commit the first time is then a duplicate.
func (s *Server) drainHold() (int, error) {
	st := s.engine.KVStore(tenancy.SystemTenant)
	entries, err := st.KVList(tenancy.SystemTenant, holdNS, nil, nil, holdBatch)
	if err != nil {
		return 0, err
	}
	size := 0
	for i := range entries {
		size += len(entries[i].Value)
		if i > 0 && size > holdBatchBytes {
			entries = entries[:i]
			break
		}
	}
	if len(entries) == 0 {
		return 0, nil
	}
	if err := s.deliverHeld(entries); err != nil {
		s.maint.stats.mu.Lock()
		s.maint.stats.lastError = err.Error()
		s.maint.stats.mu.Unlock()
		return 0, err
	}
	s.maint.stats.mu.Lock()
	s.maint.stats.lastError = ""
	s.maint.stats.mu.Unlock()
	return len(entries), nil
}

// holdBatchBytes bounds the held bytes one drain step pushes, so its raft
// entries stay far below QUEEN_RAFT_ENTRY_MAX_BYTES.
const holdBatchBytes = 1 << 20

// heldTenant is one tenant's share of a drain step: its commands, one per
// partition, in the order the partitions first appear.
type heldTenant struct {
	tenant wire.ID
	cmds   []wire.PushCmd
	index  map[[2]string]int
}

// deliverHeld pushes the entries' items to their queues, then releases
// the entries from the hold; each delete is conditional on the entry still
// being as read, so two drainers never decrement the counter twice.
func (s *Server) deliverHeld(entries []wire.KVItem) error {
	var tenants []*heldTenant
	byTenant := map[wire.ID]*heldTenant{}
	counts := make([]int, len(entries))
	for i := range entries {
		tenant, cmds, items, err := decodeHeld(s.engine.OpenText(entries[i].Value))
		if err != nil {
			return err
		}
		counts[i] = items
		ht := byTenant[tenant]
		if ht == nil {
			ht = &heldTenant{tenant: tenant, index: map[[2]string]int{}}
			byTenant[tenant] = ht
			tenants = append(tenants, ht)
		}
		for _, c := range cmds {
			k := [2]string{c.Queue, c.Partition}
			j, ok := ht.index[k]
			if !ok {
				j = len(ht.cmds)
				ht.index[k] = j
				c.Records = append([]byte(nil), c.Records...)
				ht.cmds = append(ht.cmds, c)
				continue
			}
			ht.cmds[j].Records = append(ht.cmds[j].Records, c.Records...)
			ht.cmds[j].Count += c.Count
		}
	}
	ctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	for _, ht := range tenants {
		outs, err := s.engine.Push(ctx, ht.tenant, ht.cmds)
		if err != nil {
			return fmt.Errorf("api: maintenance hold: deliver: %w", err)
		}
		for i := range outs {
			if err := pushError(&outs[i]); err != nil {
				return fmt.Errorf("api: maintenance hold: deliver to %s: %w", ht.cmds[i].Queue, err)
			}
		}
	}
	if s.releaseHeld(ctx, entries, counts) {
		return nil
	}
	// Another drainer released some first (a leader change): release the
	// rest one by one; the pushes above of those were duplicates.
	released := 0
	for i := range entries {
		if s.releaseHeld(ctx, entries[i:i+1], counts[i:i+1]) {
			released++
		}
	}
	if released == 0 && ctx.Err() != nil {
		return fmt.Errorf("api: maintenance hold: release: %w", ctx.Err())
	}
	return nil
}

// releaseHeld deletes entries from the hold and takes their items off the
// counter, all or nothing.
func (s *Server) releaseHeld(ctx context.Context, entries []wire.KVItem, counts []int) bool {
	ops := make([]wire.KVOp, 0, len(entries)+1)
	total := 0
	for i, e := range entries {
		ops = append(ops, wire.KVOp{Op: wire.KVDelete, NS: holdNS, Key: e.Key, HasExpect: true, Expect: e.Version, Required: true})
		total += counts[i]
	}
	ops = append(ops, wire.KVOp{Op: wire.KVIncr, NS: systemNS, Key: []byte(holdCounterKey), Delta: -int64(total), Required: true})
	res, err := s.engine.KV(ctx, &wire.KVCmd{Tenant: tenancy.SystemTenant, Ops: ops})
	if err != nil || res.Code != wire.CodeOK || !res.OK {
		return false
	}
	s.maint.stats.mu.Lock()
	s.maint.stats.delivered += uint64(total)
	s.maint.stats.mu.Unlock()
	return true
}

// holdingPush is the push handler's one check (an atomic load) for
// maintenance; holdPush answers it when it says so.
func holding(e *raftgroups.Engine) bool { return e != nil && e.Holding() }
