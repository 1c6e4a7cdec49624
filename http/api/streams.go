package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// Streams (issue 34): the server side of Queen's SDK stream processing.
// Queries and state rows are KV entries of the tenant's KV group in the
// reserved namespace wire.StreamsNamespace, which the KV routes cannot
// name; a cycle is one transaction (streams_cycle.go). Key layout:
//
//	n/<name>                          the query's id (JSON string)
//	q/<id>                            the query (streamQuery, JSON)
//	s/<id>/<gen>/<partition>/<key>    a state row (streamRow, JSON, sealed
//	                                  when the sink queue is encrypted)
//
// A reset bumps the query's generation: the old generation's rows vanish
// from every read at once, in the one KV write that stores the new hash,
// and are deleted afterwards in batches (streamsSweep).

// streamQuery is a registered query.
type streamQuery struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	SourceQueue string `json:"sourceQueue"`
	SinkQueue   string `json:"sinkQueue,omitempty"`
	ConfigHash  string `json:"configHash"`
	Gen         uint64 `json:"gen"`
	CreatedMs   int64  `json:"createdMs"`
	UpdatedMs   int64  `json:"updatedMs"`
	version     uint64 // the KV version it was read at
}

// streamRow is a stored state row: the value as the cycle sent it, and
// when the cycle wrote it (the proposing node's clock).
type streamRow struct {
	Value     json.RawMessage `json:"v"`
	UpdatedMs int64           `json:"u"`
}

// Limits of the Streams routes.
const (
	maxStreamStateOps  = wire.MaxKVOpsPerCall * 4 // what one KV operation of a transaction decodes
	maxStreamStateRows = 100_000                  // rows one state/get answers
	maxStreamStateSize = 64 << 20                 // value bytes one state/get answers
	maxStreamKeyBytes  = 384                      // a state key; with the prefix within wire.MaxKVKeyBytes
	maxStreamPartBytes = 64                       // a partition id
	streamsSweepBatch  = wire.MaxKVOpsPerCall     // deletes per KV command of a sweep
)

func streamNameKey(name string) []byte { return []byte("n/" + name) }
func streamQueryKey(id string) []byte  { return []byte("q/" + id) }

// streamStatePrefix is where the rows of a query's generation live, for one
// partition when partition is not empty.
func streamStatePrefix(q *streamQuery, partition string) []byte {
	p := "s/" + q.ID + "/" + strconv.FormatUint(q.Gen, 10) + "/"
	if partition != "" {
		p += partition + "/"
	}
	return []byte(p)
}

// streamPartition is a partition id as the SDKs send it: a JSON string or
// number, kept as its decimal text.
type streamPartition string

func (p *streamPartition) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return badRequest("partition_id must be a string or a number")
		}
	} else {
		s = string(b)
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return badRequest("partition_id must be a string or a number")
		}
	}
	*p = streamPartition(s)
	return nil
}

func (p streamPartition) check() error {
	switch {
	case p == "":
		return badRequest("partition_id is required")
	case len(p) > maxStreamPartBytes || strings.ContainsAny(string(p), "/\x00"):
		return badRequest("partition_id must be at most 64 bytes without '/'")
	}
	return nil
}

// streamQueryByID reads a query, linearizably; found false when it does
// not exist.
func (s *Server) streamQueryByID(ctx context.Context, tenant wire.ID, id string) (*streamQuery, bool, error) {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/\x00") {
		return nil, false, nil
	}
	store, err := s.kvStore(ctx, tenant)
	if err != nil {
		return nil, false, err
	}
	it, ok, err := store.KVGet(tenant, wire.StreamsNamespace, streamQueryKey(id))
	if err != nil || !ok {
		return nil, false, err
	}
	var q streamQuery
	if err := json.Unmarshal(it.Value, &q); err != nil {
		return nil, false, fmt.Errorf("streams: stored query %s: %w", id, err)
	}
	q.version = it.Version
	return &q, true, nil
}

// streamQueryByName reads the query registered under name.
func (s *Server) streamQueryByName(ctx context.Context, tenant wire.ID, name string) (*streamQuery, bool, error) {
	store, err := s.kvStore(ctx, tenant)
	if err != nil {
		return nil, false, err
	}
	it, ok, err := store.KVGet(tenant, wire.StreamsNamespace, streamNameKey(name))
	if err != nil || !ok {
		return nil, false, err
	}
	var id string
	if err := json.Unmarshal(it.Value, &id); err != nil {
		return nil, false, fmt.Errorf("streams: stored name %q: %w", name, err)
	}
	return s.streamQueryByID(ctx, tenant, id)
}

type streamQueryRequest struct {
	Name        string `json:"name"`
	SourceQueue string `json:"source_queue"`
	SinkQueue   string `json:"sink_queue"`
	ConfigHash  string `json:"config_hash"`
	Reset       bool   `json:"reset"`
}

type streamQueryAnswer struct {
	Success    bool   `json:"success"`
	QueryID    string `json:"query_id"`
	Name       string `json:"name"`
	ConfigHash string `json:"config_hash,omitempty"`
	Fresh      bool   `json:"fresh"`
	Reset      bool   `json:"reset"`
	Error      string `json:"error,omitempty"`
}

// errStreamRace is a registration that lost a race with another one for
// the same name: it reads again.
var errStreamRace = errors.New("streams: the query changed while it was registered")

// streamsRegister is POST /streams/v1/queries: insert, keep, reset or
// refuse (409) a query by name and config hash.
func (s *Server) streamsRegister(ctx *fasthttp.RequestCtx) error {
	var req streamQueryRequest
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	switch {
	case req.Name == "" || req.SourceQueue == "" || req.ConfigHash == "":
		return badRequest("name, source_queue and config_hash are required")
	case len(req.Name) > 256 || strings.ContainsRune(req.Name, 0):
		return badRequest("name must be at most 256 bytes")
	case len(req.ConfigHash) > 512:
		return badRequest("config_hash must be at most 512 bytes")
	}
	if err := checkName("source_queue", req.SourceQueue); err != nil {
		return err
	}
	if req.SinkQueue != "" {
		if err := checkName("sink_queue", req.SinkQueue); err != nil {
			return err
		}
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	for range 4 {
		ans, status, swept, err := s.registerOnce(rctx, tenant, &req)
		if errors.Is(err, errStreamRace) {
			continue
		}
		if err != nil {
			return err
		}
		if swept != nil {
			s.streamsSweep(rctx, tenant, swept)
		}
		writeJSON(ctx, status, ans)
		return nil
	}
	return &apiError{http.StatusConflict, "conflict", "the query kept changing while it was registered; retry"}
}

// registerOnce reads the query by name and writes what the request makes
// of it, conditional on the version read. swept is a reset query whose
// older generations' rows are to be deleted.
func (s *Server) registerOnce(ctx context.Context, tenant wire.ID, req *streamQueryRequest) (ans streamQueryAnswer, status int, swept *streamQuery, err error) {
	q, found, err := s.streamQueryByName(ctx, tenant, req.Name)
	if err != nil {
		return ans, 0, nil, err
	}
	now := time.Now().UnixMilli()
	ans = streamQueryAnswer{Success: true, Name: req.Name, ConfigHash: req.ConfigHash}
	var ops []wire.KVOp
	switch {
	case !found:
		id, err := uuid.NewV7()
		if err != nil {
			return ans, 0, nil, err
		}
		q = &streamQuery{ID: id.String(), Name: req.Name, SourceQueue: req.SourceQueue, SinkQueue: req.SinkQueue,
			ConfigHash: req.ConfigHash, CreatedMs: now, UpdatedMs: now}
		idJSON, _ := json.Marshal(q.ID)
		// A registration racing this one for the name finds it taken and
		// reads again.
		ops = append(ops, wire.KVOp{Op: wire.KVPutIfAbsent, NS: wire.StreamsNamespace, Key: streamNameKey(req.Name), Value: idJSON, Required: true})
		ops = append(ops, streamQueryPut(q, wire.KVPutIfAbsent, 0))
		ans.Fresh = true
	case q.ConfigHash == req.ConfigHash:
		q.SourceQueue, q.SinkQueue, q.UpdatedMs = req.SourceQueue, req.SinkQueue, now
		ops = append(ops, streamQueryPut(q, wire.KVPut, q.version))
	case req.Reset:
		q.SourceQueue, q.SinkQueue, q.ConfigHash, q.UpdatedMs = req.SourceQueue, req.SinkQueue, req.ConfigHash, now
		q.Gen++
		ops = append(ops, streamQueryPut(q, wire.KVPut, q.version))
		ans.Reset, swept = true, q
	default:
		return streamQueryAnswer{QueryID: q.ID, Name: q.Name,
				Error: fmt.Sprintf("query %q is registered with another config_hash; register with reset:true to drop its state and use the new one", q.Name)},
			http.StatusConflict, nil, nil
	}
	ans.QueryID = q.ID
	res, err := s.engine.KV(ctx, &wire.KVCmd{Tenant: tenant, Ops: ops})
	if err != nil {
		return ans, 0, nil, err
	}
	if !res.OK {
		return ans, 0, nil, errStreamRace
	}
	return ans, http.StatusOK, swept, nil
}

// streamQueryPut writes q, on a version when op is a put with expect.
func streamQueryPut(q *streamQuery, op uint8, version uint64) wire.KVOp {
	b, _ := json.Marshal(q)
	o := wire.KVOp{Op: op, NS: wire.StreamsNamespace, Key: streamQueryKey(q.ID), Value: b, Required: true}
	if op == wire.KVPut {
		o.HasExpect, o.Expect = true, version
	}
	return o
}

// streamsSweep deletes the rows of q's generations before its current one
// (a reset made them unreadable), a batch per KV command, until none is
// left or the request's time is up; what is left is deleted by the next
// reset's sweep. Failures are logged: the reset itself committed.
func (s *Server) streamsSweep(ctx context.Context, tenant wire.ID, q *streamQuery) {
	all := []byte("s/" + q.ID + "/")
	keep := streamStatePrefix(q, "")
	var after []byte
	for ctx.Err() == nil {
		store, err := s.kvStore(ctx, tenant)
		if err != nil {
			s.log.Warn("streams: sweeping a reset query's state", "query", q.ID, "err", err)
			return
		}
		items, err := store.KVList(tenant, wire.StreamsNamespace, all, after, wire.MaxKVPrefixResult)
		if err != nil || len(items) == 0 {
			return
		}
		after = items[len(items)-1].Key
		var ops []wire.KVOp
		for _, it := range items {
			if !bytes.HasPrefix(it.Key, keep) {
				ops = append(ops, wire.KVOp{Op: wire.KVDelete, NS: wire.StreamsNamespace, Key: it.Key})
			}
		}
		for len(ops) > 0 {
			n := min(len(ops), streamsSweepBatch)
			if _, err := s.engine.KV(ctx, &wire.KVCmd{Tenant: tenant, Ops: ops[:n]}); err != nil {
				s.log.Warn("streams: sweeping a reset query's state", "query", q.ID, "err", err)
				return
			}
			ops = ops[n:]
		}
	}
}

type streamStateRequest struct {
	QueryID        string          `json:"query_id"`
	PartitionID    streamPartition `json:"partition_id"`
	Keys           []string        `json:"keys"`
	KeyPrefix      string          `json:"key_prefix"`
	RipeAtOrBefore *float64        `json:"ripe_at_or_before"`
}

type streamStateRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

// streamsStateGet is POST /streams/v1/state/get: a partition's state rows
// passing every filter given, sorted by key.
func (s *Server) streamsStateGet(ctx *fasthttp.RequestCtx) error {
	var req streamStateRequest
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	if err := req.PartitionID.check(); err != nil {
		return err
	}
	if req.QueryID == "" {
		return badRequest("query_id is required")
	}
	if len(req.Keys) > wire.MaxKVKeysPerCall {
		return badRequest("keys holds at most 1024 keys")
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	q, found, err := s.streamQueryByID(rctx, tenant, req.QueryID)
	if err != nil {
		return err
	}
	if !found {
		return notFound("no such query: " + req.QueryID)
	}
	rows, err := s.streamRows(rctx, tenant, q, string(req.PartitionID), &req)
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"success": true, "rows": rows})
	return nil
}

// streamRows reads a partition's rows through the request's filters.
func (s *Server) streamRows(ctx context.Context, tenant wire.ID, q *streamQuery, partition string, req *streamStateRequest) ([]streamStateRow, error) {
	prefix := streamStatePrefix(q, partition)
	store, err := s.kvStore(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows := []streamStateRow{}
	size := 0
	keep := func(key string, it wire.KVItem) error {
		if !strings.HasPrefix(key, req.KeyPrefix) {
			return nil
		}
		var r streamRow
		if err := json.Unmarshal(s.engine.OpenText(it.Value), &r); err != nil {
			return fmt.Errorf("streams: stored state row: %w", err)
		}
		if req.RipeAtOrBefore != nil {
			var v struct {
				WindowEnd json.Number `json:"windowEnd"`
			}
			if json.Unmarshal(r.Value, &v) != nil || v.WindowEnd == "" {
				return nil
			}
			end, err := v.WindowEnd.Float64()
			if err != nil || end > *req.RipeAtOrBefore {
				return nil
			}
		}
		size += len(r.Value)
		if len(rows) >= maxStreamStateRows || size > maxStreamStateSize {
			return badRequest("more than 100000 state rows or 64 MiB of values match; narrow the request with keys or key_prefix")
		}
		rows = append(rows, streamStateRow{Key: key, Value: r.Value, UpdatedAt: isoMs(r.UpdatedMs)})
		return nil
	}
	if len(req.Keys) > 0 {
		seen := map[string]bool{}
		for _, k := range req.Keys {
			if seen[k] {
				continue
			}
			seen[k] = true
			it, ok, err := store.KVGet(tenant, wire.StreamsNamespace, append(bytes.Clone(prefix), k...))
			if err != nil {
				return nil, err
			}
			if ok {
				if err := keep(k, it); err != nil {
					return nil, err
				}
			}
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
		return rows, nil
	}
	// Listed in key order, from the prefix on.
	list := append(bytes.Clone(prefix), req.KeyPrefix...)
	err = store.KVEach(tenant, wire.StreamsNamespace, list, func(it wire.KVItem) error {
		return keep(string(it.Key[len(prefix):]), it)
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// isoMs renders unix milliseconds as Queen renders timestamps.
func isoMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
