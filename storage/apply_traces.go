package storage

import (
	"bytes"
	"encoding/binary"

	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// Traces are per-message event records, looked up by message (partition id
// and transaction id) or by name, kept for the trace retention and removed
// in age order by a sweeper.

// DefaultTraceRetentionMs is QUEEN_RAFT_TRACE_RETENTION_S's default.
const DefaultTraceRetentionMs = 7 * 24 * 3600 * 1000

const traceSweepLimit = 512

type traceRec struct {
	createdMs int64
	group     string
	eventType string
	data      []byte
	names     []string
}

func (t *traceRec) encode() []byte {
	w := wire.Writer{}
	w.Varint(t.createdMs)
	w.String(t.group)
	w.String(t.eventType)
	w.Bytes(t.data)
	w.Uvarint(uint64(len(t.names)))
	for _, n := range t.names {
		w.String(n)
	}
	return w.B
}

func decodeTrace(b []byte) (traceRec, bool) {
	r := wire.NewReader(b)
	t := traceRec{createdMs: r.Varint(), group: r.String(), eventType: r.String()}
	t.data = append([]byte(nil), r.Bytes()...)
	t.names = make([]string, r.Count(wire.MaxTraceNames, 1))
	for i := range t.names {
		t.names[i] = r.String()
	}
	return t, r.Done() == nil
}

func traceKey(tenant wire.ID, pid uint64, txn string, seq uint64) []byte {
	b := append([]byte{tagTrace}, tenant[:]...)
	b = appendU64(b, pid)
	b = append(b, txn...)
	b = append(b, 0)
	return appendU64(b, seq)
}

func traceNameKey(tenant wire.ID, name string, createdMs int64, seq uint64) []byte {
	b := nsKey(tagTraceName, tenant, name, nil)
	b = appendU64(b, uint64(createdMs))
	return appendU64(b, seq)
}

func (s *Store) applyTrace(ctx *applyCtx, c *wire.TraceCmd) wire.TraceResult {
	var seq uint64
	if s.tenantCountersOn() {
		seq = s.nextTenantID(ctx, counterTrace, c.Tenant, s.traceSeq)
	} else {
		s.traceSeq++
		seq = s.traceSeq
		ctx.set(keyTraceSeq, binary.BigEndian.AppendUint64(nil, seq))
	}
	rec := traceRec{createdMs: ctx.nowMs, group: c.Group, eventType: c.EventType, data: c.Data, names: c.Names}
	key := traceKey(c.Tenant, c.PartitionID, c.TxnID, seq)
	ctx.set(key, rec.encode())
	for _, n := range c.Names {
		ctx.set(traceNameKey(c.Tenant, n, ctx.nowMs, seq), key)
	}
	age := appendU64(appendU64([]byte{tagTraceAge}, uint64(ctx.nowMs)), seq)
	if s.tenantCountersOn() {
		// Two tenants' traces may now share a sequence number and a
		// millisecond: the tenant keeps their age keys apart (the sweep
		// reads only the age and the trace key the value names).
		age = append(age, c.Tenant[:]...)
	}
	ctx.set(age, key)
	return wire.TraceResult{Code: wire.CodeOK, Seq: seq, CreatedMs: ctx.nowMs}
}

// traceSweeper removes trace events older than the trace retention the
// tick carries (the proposing leader's; the default when it carries none):
// never this replica's own setting, which may differ from its peers'
// (before FormatV2 it was that setting).
type traceSweeper struct{}

func (traceSweeper) name() string { return "traces" }

func (traceSweeper) due(s *Store, nowMs int64) bool {
	first, ok := s.firstKeyHeld([]byte{tagTraceAge})
	return ok && len(first) >= 9 && int64(binary.BigEndian.Uint64(first[1:9])) <= nowMs-s.cfg.TraceRetentionMs
}

func (traceSweeper) sweep(s *Store, ctx *applyCtx) {
	retention := ctx.tick.TraceRetentionMs
	switch {
	case !s.at(wire.FormatV2):
		retention = s.cfg.TraceRetentionMs // as builds before FormatV2 did
	case retention <= 0:
		retention = DefaultTraceRetentionMs
	}
	lower := []byte{tagTraceAge}
	it := ctx.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	type old struct{ age, key []byte }
	var olds []old
	for it.First(); it.Valid() && len(olds) < traceSweepLimit; it.Next() {
		if int64(binary.BigEndian.Uint64(it.Key()[1:9])) > ctx.nowMs-retention {
			break
		}
		olds = append(olds, old{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
	}
	ctx.closeIter(it)
	for _, o := range olds {
		ctx.del(o.age)
		v, ok := ctx.get(o.key)
		if !ok {
			continue
		}
		if rec, ok := decodeTrace(v); ok {
			var tenant wire.ID
			copy(tenant[:], o.key[1:17])
			seq := binary.BigEndian.Uint64(o.key[len(o.key)-8:])
			for _, n := range rec.names {
				ctx.del(traceNameKey(tenant, n, rec.createdMs, seq))
			}
		}
		ctx.del(o.key)
	}
}

// TraceEvent is a trace as a reader sees it.
type TraceEvent struct {
	Seq         uint64
	PartitionID uint64
	TxnID       string
	CreatedMs   int64
	Group       string
	EventType   string
	Data        []byte
	Names       []string
}

func traceEventOf(key []byte, rec traceRec) TraceEvent {
	ev := TraceEvent{CreatedMs: rec.createdMs, Group: rec.group, EventType: rec.eventType, Data: rec.data, Names: rec.names}
	ev.PartitionID = binary.BigEndian.Uint64(key[17:25])
	rest := key[25:]
	ev.TxnID = string(rest[:len(rest)-9])
	ev.Seq = binary.BigEndian.Uint64(rest[len(rest)-8:])
	return ev
}

// TracesOf lists a message's trace events, oldest first.
func (s *Store) TracesOf(tenant wire.ID, pid uint64, txn string) ([]TraceEvent, error) {
	prefix := traceKey(tenant, pid, txn, 0)
	prefix = prefix[:len(prefix)-8]
	var out []TraceEvent
	err := s.scanPrefix(prefix, func(k, v []byte) bool {
		if rec, ok := decodeTrace(v); ok {
			out = append(out, traceEventOf(k, rec))
		}
		return len(out) < 10000
	})
	return out, err
}

// TracesByName lists the newest events carrying a trace name, up to limit.
func (s *Store) TracesByName(tenant wire.ID, name string, limit int) ([]TraceEvent, error) {
	var keys [][]byte
	err := s.scanPrefix(nsKey(tagTraceName, tenant, name, nil), func(_, v []byte) bool {
		keys = append(keys, append([]byte(nil), v...))
		return true
	})
	if err != nil {
		return nil, err
	}
	var out []TraceEvent
	for i := len(keys) - 1; i >= 0 && len(out) < limit; i-- {
		if v, ok := s.getCommitted(keys[i]); ok {
			if rec, ok := decodeTrace(v); ok {
				out = append(out, traceEventOf(keys[i], rec))
			}
		}
	}
	return out, nil
}

// TraceNames lists the tenant's trace names.
func (s *Store) TraceNames(tenant wire.ID, limit int) ([]string, error) {
	return s.distinctNames(append([]byte{tagTraceName}, tenant[:]...), limit)
}

// distinctNames lists the distinct names of keys laid out as
// lower + name + 0 + ..., jumping from one name to the next instead of
// reading every key.
func (s *Store) distinctNames(lower []byte, limit int) ([]string, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	defer it.Close()
	var out []string
	for valid := it.First(); valid && len(out) < limit; {
		rest := it.Key()[len(lower):]
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			valid = it.Next()
			continue
		}
		out = append(out, string(rest[:i]))
		valid = it.SeekGE(append(append(append([]byte(nil), lower...), rest[:i]...), 1))
	}
	return out, it.Error()
}

// scanPrefix calls f for committed keys with prefix until it returns false.
func (s *Store) scanPrefix(prefix []byte, f func(k, v []byte) bool) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if !f(it.Key(), it.Value()) {
			break
		}
	}
	return it.Error()
}

// getCommitted reads one committed value.
func (s *Store) getCommitted(key []byte) ([]byte, bool) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, false
	}
	v, closer, err := s.db.Get(key)
	if err != nil {
		return nil, false
	}
	defer closer.Close()
	return append([]byte(nil), v...), true
}
