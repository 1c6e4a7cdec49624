package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// KV routes (spec §2.12). Values are JSON; keys are namespaced. A tenant's
// KV lives in one group (its KV group). Reads are linearizable: a
// ReadIndex barrier on that group, then this node's store of it.

var kvNamespacePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// reservedKVNamespaces can be read and checked through the KV API, but only
// their owners (locks, the Kafka facade, the supervisor) write them.
var reservedKVNamespaces = map[string]bool{wire.LocksNamespace: true, "queen-supervisor": true, "queen-kafka": true}

var kvOps = map[string]uint8{
	"get": wire.KVGet, "getMany": wire.KVGetMany, "getPrefix": wire.KVGetPrefix, "put": wire.KVPut,
	"putIfAbsent": wire.KVPutIfAbsent, "delete": wire.KVDelete, "incr": wire.KVIncr, "check": wire.KVCheck,
}

type kvOpRequest struct {
	Op         string          `json:"op"`
	NS         string          `json:"ns"`
	Key        string          `json:"key"`
	Keys       []string        `json:"keys"`
	Prefix     string          `json:"prefix"`
	Limit      uint32          `json:"limit"`
	Value      json.RawMessage `json:"value"`
	Expect     *uint64         `json:"expect"`
	TTLSeconds *uint32         `json:"ttlSeconds"`
	Delta      *int64          `json:"delta"`
	Min        *int64          `json:"min"`
	Max        *int64          `json:"max"`
	Required   bool            `json:"required"`
}

type kvItemAnswer struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Version   uint64          `json:"version"`
	Found     bool            `json:"found"`
	ExpiresAt *string         `json:"expiresAt"`
}

type kvOpAnswer struct {
	Applied   bool            `json:"applied"`
	Reason    *string         `json:"reason"`
	Value     json.RawMessage `json:"value"`
	Version   uint64          `json:"version"`
	Found     bool            `json:"found"`
	ExpiresAt *string         `json:"expiresAt"`
	Items     []kvItemAnswer  `json:"items,omitempty"`
}

// kvBuildOps validates KV operations and turns them into wire operations;
// valueLimit is QUEEN_KV_MAX_VALUE_BYTES. Writes to reserved namespaces are
// refused with 403 reserved.
func kvBuildOps(reqs []kvOpRequest, valueLimit int) (ops []wire.KVOp, err error) {
	if len(reqs) == 0 || len(reqs) > wire.MaxKVOpsPerCall {
		return nil, badRequest("operations must hold 1.." + strconv.Itoa(wire.MaxKVOpsPerCall) + " items")
	}
	keys := 0
	for i, r := range reqs {
		op, ok := kvOps[r.Op]
		if !ok {
			return nil, badRequest("operation " + strconv.Itoa(i) + ": unknown op " + strconv.Quote(r.Op))
		}
		if !kvNamespacePattern.MatchString(r.NS) {
			return nil, badRequest("operation " + strconv.Itoa(i) + ": ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
		}
		o := wire.KVOp{Op: op, NS: r.NS, Key: []byte(r.Key), Required: r.Required, Limit: r.Limit}
		switch op {
		case wire.KVGetMany:
			for _, k := range r.Keys {
				o.Keys = append(o.Keys, []byte(k))
			}
			keys += len(r.Keys)
		case wire.KVGetPrefix:
			o.Key = []byte(r.Prefix)
			keys++
		default:
			if r.Key == "" {
				return nil, badRequest("operation " + strconv.Itoa(i) + ": key is required")
			}
			keys++
		}
		for _, k := range append([][]byte{o.Key}, o.Keys...) {
			if len(k) > wire.MaxKVKeyBytes {
				return nil, nameTooLong("a KV key is longer than 512 bytes")
			}
		}
		if writes := op == wire.KVPut || op == wire.KVPutIfAbsent || op == wire.KVDelete || op == wire.KVIncr; writes && reservedKVNamespaces[r.NS] {
			return nil, &apiError{http.StatusForbidden, "reserved", "namespace " + r.NS + " is reserved"}
		}
		if op == wire.KVPut || op == wire.KVPutIfAbsent {
			if len(r.Value) == 0 {
				return nil, badRequest("operation " + strconv.Itoa(i) + ": value is required")
			}
			if len(r.Value) > valueLimit {
				return nil, &apiError{http.StatusRequestEntityTooLarge, "value_too_large", "a KV value is larger than QUEEN_KV_MAX_VALUE_BYTES"}
			}
			o.Value = compactJSON(r.Value)
		}
		if r.Expect != nil {
			o.HasExpect, o.Expect = true, *r.Expect
		}
		if r.TTLSeconds != nil {
			o.TTLSec = *r.TTLSeconds
		}
		if op == wire.KVIncr {
			o.Delta = 1
			if r.Delta != nil {
				o.Delta = *r.Delta
			}
		}
		if r.Min != nil {
			o.HasMin, o.Min = true, *r.Min
		}
		if r.Max != nil {
			o.HasMax, o.Max = true, *r.Max
		}
		ops = append(ops, o)
	}
	if keys > wire.MaxKVKeysPerCall {
		return nil, badRequest("more than 1024 keys in one call")
	}
	return ops, nil
}

// compactJSON drops insignificant whitespace from a JSON value.
func compactJSON(b json.RawMessage) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

// kvOnlyReads reports whether a batch only reads, so it can be served
// locally after a barrier instead of going through the log.
func kvOnlyReads(ops []wire.KVOp) bool {
	for _, o := range ops {
		if o.Op != wire.KVGet && o.Op != wire.KVGetMany && o.Op != wire.KVGetPrefix {
			return false
		}
	}
	return true
}

// kv is POST /api/v1/kv.
func (s *Server) kv(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var req struct {
		Operations []kvOpRequest `json:"operations"`
	}
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	ops, err := kvBuildOps(req.Operations, s.cfg.KVMaxValueBytes)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	var res wire.KVResult
	if kvOnlyReads(ops) {
		if res, err = s.kvReadLocal(rctx, tenant, ops); err != nil {
			return err
		}
	} else if res, err = s.engine.KV(rctx, &wire.KVCmd{Tenant: tenant, Ops: ops}); err != nil {
		return err
	}
	results := make([]kvOpAnswer, len(res.Ops))
	for i := range res.Ops {
		results[i] = kvOpView(&res.Ops[i])
	}
	out := map[string]any{"results": results, "ok": res.OK}
	if !res.OK {
		failed := res.Ops[res.FailedIndex]
		out["reason"] = "kv_precondition"
		out["failedIndex"] = res.FailedIndex
		out["kvReason"] = failed.Reason
		out["version"] = failed.Item.Version
	}
	writeJSON(ctx, http.StatusOK, out)
	return nil
}

// kvStore is this node's store of the group holding tenant's KV, after a
// read barrier on that group so the reads that follow are linearizable.
func (s *Server) kvStore(ctx context.Context, tenant wire.ID) (*storage.Store, error) {
	if err := s.engine.Barrier(ctx, s.engine.KVGroup(tenant)); err != nil {
		return nil, err
	}
	return s.engine.KVStore(tenant), nil
}

// kvReadLocal serves read-only operations from this node after a barrier.
func (s *Server) kvReadLocal(ctx context.Context, tenant wire.ID, ops []wire.KVOp) (wire.KVResult, error) {
	store, err := s.kvStore(ctx, tenant)
	if err != nil {
		return wire.KVResult{}, err
	}
	res := wire.KVResult{Code: wire.CodeOK, OK: true, FailedIndex: -1, Ops: make([]wire.KVOpResult, len(ops))}
	for i, o := range ops {
		r := &res.Ops[i]
		r.Applied = true
		switch o.Op {
		case wire.KVGet:
			it, found, err := store.KVGet(tenant, o.NS, o.Key)
			if err != nil {
				return res, err
			}
			r.Item, r.Found = it, found
		case wire.KVGetMany:
			for _, k := range o.Keys {
				it, _, err := store.KVGet(tenant, o.NS, k)
				if err != nil {
					return res, err
				}
				r.Items = append(r.Items, it)
			}
		case wire.KVGetPrefix:
			items, err := store.KVList(tenant, o.NS, o.Key, nil, int(o.Limit))
			if err != nil {
				return res, err
			}
			r.Items = items
		}
	}
	return res, nil
}

func kvOpView(r *wire.KVOpResult) kvOpAnswer {
	a := kvOpAnswer{Applied: r.Applied, Found: r.Found, Version: r.Item.Version, Value: jsonValue(r.Item.Value),
		ExpiresAt: expiresAt(r.Item.ExpiresMs)}
	if r.Reason != "" {
		reason := r.Reason
		a.Reason = &reason
	}
	for _, it := range r.Items {
		a.Items = append(a.Items, kvItemView(it))
	}
	return a
}

func kvItemView(it wire.KVItem) kvItemAnswer {
	return kvItemAnswer{Key: string(it.Key), Value: jsonValue(it.Value), Version: it.Version, Found: it.Version != 0,
		ExpiresAt: expiresAt(it.ExpiresMs)}
}

// jsonValue renders a stored value: JSON as itself, other text as a string,
// nothing as null.
func jsonValue(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	if json.Valid(b) {
		return b
	}
	v, _ := renderBytes(b)
	return v
}

func expiresAt(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := isoMillis(ms)
	return &s
}

// kvKeyRoute reads the namespace and key of /api/v1/kv/{ns}/{key:*}.
func kvKeyRoute(ctx *fasthttp.RequestCtx) (ns string, key []byte, err error) {
	ns = pathArg(ctx, "ns")
	k := pathArg(ctx, "key")
	if !kvNamespacePattern.MatchString(ns) {
		return "", nil, badRequest("ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
	}
	if k == "" {
		return "", nil, badRequest("key is required")
	}
	if len(k) > wire.MaxKVKeyBytes {
		return "", nil, nameTooLong("a KV key is longer than 512 bytes")
	}
	return ns, []byte(k), nil
}

// kvGet is GET /api/v1/kv/:ns/*key: a miss is 200 found:false; ETag is the
// version.
func (s *Server) kvGet(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	ns, key, err := kvKeyRoute(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	store, err := s.kvStore(rctx, tenant)
	if err != nil {
		return err
	}
	it, found, err := store.KVGet(tenant, ns, key)
	if err != nil {
		return err
	}
	if found {
		ctx.Response.Header.Set("ETag", strconv.Quote(strconv.FormatUint(it.Version, 10)))
	}
	v := kvItemView(it)
	v.Found = found
	writeJSON(ctx, http.StatusOK, map[string]any{"ns": ns, "key": v.Key, "found": found, "value": v.Value,
		"version": v.Version, "expiresAt": v.ExpiresAt})
	return nil
}

// kvPut is PUT /api/v1/kv/:ns/*key: the body is the value; ?ttlSeconds=
// sets a TTL and If-Match: "<version>" makes it a compare-and-set.
func (s *Server) kvPut(ctx *fasthttp.RequestCtx) error {
	ns, key, err := kvKeyRoute(ctx)
	if err != nil {
		return err
	}
	body := ctx.PostBody()
	if !json.Valid(body) {
		return badRequest("the body must be a JSON value")
	}
	r := kvOpRequest{Op: "put", NS: ns, Key: string(key), Value: body}
	if v := ctx.QueryArgs().Peek("ttlSeconds"); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 32)
		if err != nil {
			return badRequest("ttlSeconds must be a whole number")
		}
		ttl := uint32(n)
		r.TTLSeconds = &ttl
	}
	if m := strings.Trim(string(ctx.Request.Header.Peek("If-Match")), `"`); m != "" {
		n, err := strconv.ParseUint(m, 10, 64)
		if err != nil {
			return badRequest("If-Match must be a version")
		}
		r.Expect = &n
	}
	return s.kvSingle(ctx, r)
}

// kvDelete is DELETE /api/v1/kv/:ns/*key.
func (s *Server) kvDelete(ctx *fasthttp.RequestCtx) error {
	ns, key, err := kvKeyRoute(ctx)
	if err != nil {
		return err
	}
	return s.kvSingle(ctx, kvOpRequest{Op: "delete", NS: ns, Key: string(key)})
}

func (s *Server) kvSingle(ctx *fasthttp.RequestCtx, r kvOpRequest) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	ops, err := kvBuildOps([]kvOpRequest{r}, s.cfg.KVMaxValueBytes)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.KV(rctx, &wire.KVCmd{Tenant: tenant, Ops: ops})
	if err != nil {
		return err
	}
	v := kvOpView(&res.Ops[0])
	if v.Applied && v.Version != 0 {
		ctx.Response.Header.Set("ETag", strconv.Quote(strconv.FormatUint(v.Version, 10)))
	}
	writeJSON(ctx, http.StatusOK, v)
	return nil
}

// kvNamespaces is GET /api/v1/resources/kv/namespaces.
func (s *Server) kvNamespaces(ctx *fasthttp.RequestCtx) error {
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
	ns, err := store.KVNamespaces(tenant)
	if err != nil {
		return err
	}
	// The Streams namespace is the Streams routes' (streams.go), not a
	// namespace the KV routes can name.
	ns = slices.DeleteFunc(ns, func(n string) bool { return n == wire.StreamsNamespace })
	if ns == nil {
		ns = []string{}
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"namespaces": ns})
	return nil
}

// kvList is POST /api/v1/resources/kv/list {ns, prefix?, after?, limit?}:
// the cursor is a key, hence POST.
func (s *Server) kvList(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var req struct {
		NS     string `json:"ns"`
		Prefix string `json:"prefix"`
		After  string `json:"after"`
		Limit  int    `json:"limit"`
	}
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	if !kvNamespacePattern.MatchString(req.NS) {
		return badRequest("ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
	}
	if req.Limit <= 0 || req.Limit > wire.MaxKVPrefixResult {
		req.Limit = 100
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	store, err := s.kvStore(rctx, tenant)
	if err != nil {
		return err
	}
	items, err := store.KVList(tenant, req.NS, []byte(req.Prefix), []byte(req.After), req.Limit+1)
	if err != nil {
		return err
	}
	var next *string
	if len(items) > req.Limit {
		items = items[:req.Limit]
		k := string(items[len(items)-1].Key)
		next = &k
	}
	out := make([]kvItemAnswer, len(items))
	for i, it := range items {
		out[i] = kvItemView(it)
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"ns": req.NS, "items": out, "next": next})
	return nil
}
