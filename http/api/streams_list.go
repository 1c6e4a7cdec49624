package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// maxStreamListRows bounds the state rows one listing counts over all its
// queries: past it the sizes are marked partial instead of read on.
const maxStreamListRows = 200_000

type streamListEntry struct {
	QueryID     string `json:"query_id"`
	Name        string `json:"name"`
	SourceQueue string `json:"source_queue"`
	SinkQueue   string `json:"sink_queue,omitempty"`
	ConfigHash  string `json:"config_hash"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
	StateRows   uint64 `json:"state_rows"`
	StateBytes  uint64 `json:"state_bytes"`
	// Lag is the source queue's backlog (pending and leased messages) of
	// its most-behind consumer, as the queue's totals count it; null when
	// the queue does not exist (yet).
	Lag *uint64 `json:"lag"`
	// Partial says the state sizes stopped at the listing's bound.
	Partial bool `json:"partial,omitempty"`
}

// streamsList is GET /streams/v1/queries: the tenant's queries with their
// state's size and their source's lag, for the dashboard.
func (s *Server) streamsList(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	store, err := s.kvStore(rctx, tenant)
	if err != nil {
		return err
	}
	var queries []streamQuery
	err = store.KVEach(tenant, wire.StreamsNamespace, []byte("q/"), func(it wire.KVItem) error {
		var q streamQuery
		if json.Unmarshal(it.Value, &q) == nil {
			queries = append(queries, q)
		}
		return nil
	})
	if err != nil {
		return err
	}
	out := make([]streamListEntry, 0, len(queries))
	budget := maxStreamListRows
	for i := range queries {
		q := &queries[i]
		e := streamListEntry{QueryID: q.ID, Name: q.Name, SourceQueue: q.SourceQueue, SinkQueue: q.SinkQueue,
			ConfigHash: q.ConfigHash, CreatedAt: isoMs(q.CreatedMs), UpdatedAt: isoMs(q.UpdatedMs)}
		e.StateRows, e.StateBytes, e.Partial, err = streamStateSize(store, tenant, q, &budget)
		if err != nil {
			return err
		}
		if _, qs, err := s.queueViews(ctx, storage.QueueFilter{Name: q.SourceQueue}); err == nil && len(qs) == 1 {
			lag := qs[0].Totals.Pending + qs[0].Totals.Processing
			e.Lag = &lag
		}
		out = append(out, e)
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"success": true, "queries": out})
	return nil
}

// streamStateSize counts the rows of q's current generation, and their
// stored bytes, spending budget.
func streamStateSize(store *storage.Store, tenant wire.ID, q *streamQuery, budget *int) (rows, size uint64, partial bool, err error) {
	prefix := streamStatePrefix(q, "")
	var after []byte
	for *budget > 0 {
		items, err := store.KVList(tenant, wire.StreamsNamespace, prefix, after, min(wire.MaxKVPrefixResult, *budget))
		if err != nil {
			return 0, 0, false, err
		}
		for _, it := range items {
			rows++
			size += uint64(len(it.Key) + len(it.Value))
		}
		*budget -= len(items)
		if len(items) < wire.MaxKVPrefixResult || !bytes.HasPrefix(items[len(items)-1].Key, prefix) {
			return rows, size, false, nil
		}
		after = items[len(items)-1].Key
	}
	return rows, size, true, nil
}
