package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// Limits of spec §2.16.
const (
	maxFetchEntries = 1024
	maxFetchBytes   = 8 << 20
	// maxFetchTotalBytes caps the records of one answer over all its
	// entries (ours; the spec has only the per-entry cap).
	maxFetchTotalBytes = 16 << 20
	defaultFetchMax    = 1 << 20
	maxFetchWaitMs     = 30000
	fetchErrUnknown    = "UNKNOWN_TOPIC_OR_PARTITION"
	fetchErrOutRange   = "OFFSET_OUT_OF_RANGE"
)

type fetchRequest struct {
	Entries   []fetchEntry `json:"entries"`
	MaxWaitMs int          `json:"maxWaitMs"`
	MinBytes  int          `json:"minBytes"`
}

type fetchEntry struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	Offset    uint64 `json:"offset"`
	MaxBytes  int    `json:"maxBytes"`
}

type fetchRecord struct {
	Offset        uint64          `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
	Encoding      string          `json:"encoding,omitempty"`
	Key           json.RawMessage `json:"key,omitempty"`
	KeyEncoding   string          `json:"keyEncoding,omitempty"`
	Headers       []kafkaHeader   `json:"headers,omitempty"`
	TS            string          `json:"ts"`
}

type fetchAnswerEntry struct {
	Queue          string        `json:"queue"`
	Partition      string        `json:"partition"`
	Records        []fetchRecord `json:"records"`
	HighWatermark  uint64        `json:"highWatermark"`
	LogStartOffset uint64        `json:"logStartOffset"`
	// LastStableOffset is where an open Kafka transaction's records begin:
	// nothing from there is read until it ends.
	LastStableOffset uint64 `json:"lastStableOffset"`
	// NextOffset is the offset to fetch from next: past the last record
	// read, and past the records of aborted Kafka transactions and the
	// transaction markers the answer leaves out.
	NextOffset uint64 `json:"nextOffset"`
	Error      string `json:"error,omitempty"`
}

// fetch is POST /api/v1/fetch: records of partitions from given offsets,
// read from this node's store without lease, cursor or claim, so identical
// requests get identical records. With minBytes it waits (up to maxWaitMs)
// for that much to arrive, woken by the apply loop.
func (s *Server) fetch(ctx *fasthttp.RequestCtx) error {
	var req fetchRequest
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	if err := checkEntries(len(req.Entries)); err != nil {
		return err
	}
	if req.MaxWaitMs < 0 || req.MaxWaitMs > maxFetchWaitMs {
		return badRequest("maxWaitMs must be 0..30000")
	}
	for i := range req.Entries {
		e := &req.Entries[i]
		if err := checkNames(e.Queue, e.Partition); err != nil {
			return err
		}
		if e.MaxBytes <= 0 {
			e.MaxBytes = defaultFetchMax
		}
		if e.MaxBytes > maxFetchBytes {
			return badRequest("maxBytes must be at most 8 MiB")
		}
	}
	if err := s.aclFetch(ctx, tenant, req.Entries); err != nil {
		return err
	}
	for _, e := range req.Entries {
		s.catchUpUnknown(tenant, e.Queue, e.Partition)
	}
	deadline := time.Now().Add(time.Duration(req.MaxWaitMs) * time.Millisecond)
	for {
		var releases []func()
		var changed []<-chan struct{}
		if req.MinBytes > 0 {
			for _, e := range req.Entries {
				ch, rel := s.engine.Changed(tenant, e.Queue)
				changed, releases = append(changed, ch), append(releases, rel)
			}
		}
		out, bytes, err := s.readFetch(tenant, req.Entries)
		if err != nil || bytes >= req.MinBytes || !time.Now().Before(deadline) {
			for _, rel := range releases {
				rel()
			}
			if err != nil {
				return err
			}
			writeJSON(ctx, http.StatusOK, map[string]any{"entries": out})
			return nil
		}
		s.waitAny(changed, deadline)
		for _, rel := range releases {
			rel()
		}
	}
}

// waitAny parks until one of the channels closes, the deadline, or
// shutdown.
func (s *Server) waitAny(chs []<-chan struct{}, deadline time.Time) {
	done := make(chan struct{})
	defer close(done)
	woken := make(chan struct{}, 1)
	for _, ch := range chs {
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				select {
				case woken <- struct{}{}:
				default:
				}
			case <-done:
			}
		}(ch)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-woken:
	case <-t.C:
	case <-s.base.Done():
	}
}

func (s *Server) readFetch(tenant wire.ID, entries []fetchEntry) ([]fetchAnswerEntry, int, error) {
	out := make([]fetchAnswerEntry, len(entries))
	total := 0
	for i, e := range entries {
		a := fetchAnswerEntry{Queue: e.Queue, Partition: e.Partition, Records: []fetchRecord{}}
		p, ok := s.engine.PartitionNamed(tenant, e.Queue, e.Partition)
		if !ok {
			a.Error = fetchErrUnknown
			out[i] = a
			continue
		}
		a.HighWatermark, a.LogStartOffset = p.HighWatermark(), p.LogStart()
		if e.Offset > a.HighWatermark || e.Offset < a.LogStartOffset {
			a.NextOffset = e.Offset
			a.Error = fetchErrOutRange
			out[i] = a
			continue
		}
		// The answer as a whole holds at most maxFetchTotalBytes: an entry
		// the cap leaves no room for answers no records, and its reader
		// asks again from the same offset.
		limit := min(e.MaxBytes, maxFetchTotalBytes-total)
		if limit <= 0 {
			a.NextOffset = e.Offset
			out[i] = a
			continue
		}
		// Committed records only, as a Kafka read_committed consumer reads
		// them: up to the last stable offset, leaving out aborted
		// transactions and markers.
		txns := p.Store().Txns(p, e.Offset, a.HighWatermark)
		a.LastStableOffset, a.NextOffset = txns.LastStable, e.Offset
		size := 0
		var rerr error
		_, err := p.Store().Read(p, e.Offset, func(off uint64, appendMs int64, body []byte) bool {
			// The first record of the answer goes out whatever its size,
			// as Kafka does, so a record larger than maxBytes cannot wedge
			// a consumer; later ones only within the limits.
			if off >= txns.LastStable || ((size > 0 || total > 0) && size+len(body) > limit) {
				return false
			}
			a.NextOffset = off + 1
			if txns.Skipped(off) {
				return true
			}
			rec, err := wire.ParseRecord(body)
			if err != nil {
				rerr = err
				return false
			}
			s.engine.OpenRecord(&rec)
			size += len(body)
			v := viewOf(&rec)
			r := fetchRecord{Offset: off, TransactionID: txnIDOf(&rec), TS: isoMillis(appendMs),
				Payload: v.value, Encoding: v.encoding, Key: v.key, KeyEncoding: v.keyEncoding, Headers: v.headers}
			a.Records = append(a.Records, r)
			return true
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return nil, 0, err
		}
		total += size
		out[i] = a
	}
	return out, total, nil
}
