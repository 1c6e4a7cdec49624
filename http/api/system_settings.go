package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// Cluster-wide settings an operator changes at run time (the ephemeral
// switch, ephemeral grants) live in the reserved system tenant's KV,
// namespace queen-system: raft replicates them, so they survive restarts
// and every node reads them from its own applied state without a round
// trip. A write is a raft proposal; a read may trail it by the time the
// entry takes to apply on this node, except where a stale read would
// refuse what was just allowed (ephGranted) or an operator reads one
// (quotaGet): those catch up first.
const systemNS = "queen-system"

// Keys of the settings.
const (
	ephSwitchKey   = "ephemeral.switch"
	ephGrantPrefix = "ephemeral.grant/"
)

// errNoEngine: a server without raft (unit tests of the ephemeral ring)
// has nowhere to keep a setting.
var errNoEngine = errors.New("api: no raft engine to keep settings in")

// systemGet reads a setting from this node's applied state.
func (s *Server) systemGet(key string) ([]byte, bool) {
	if s.engine == nil {
		return nil, false
	}
	it, found, err := s.engine.KVStore(tenancy.SystemTenant).KVGet(tenancy.SystemTenant, systemNS, []byte(key))
	if err != nil || !found {
		return nil, false
	}
	return it.Value, true
}

// systemPut writes a setting (value nil deletes it) once a quorum commits
// it, within the request timeout.
func (s *Server) systemPut(key string, value []byte) error {
	if s.engine == nil {
		return errNoEngine
	}
	ctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	op := wire.KVOp{Op: wire.KVPut, NS: systemNS, Key: []byte(key), Value: value}
	if value == nil {
		op = wire.KVOp{Op: wire.KVDelete, NS: systemNS, Key: []byte(key)}
	}
	res, err := s.engine.KV(ctx, &wire.KVCmd{Tenant: tenancy.SystemTenant, Ops: []wire.KVOp{op}})
	if err != nil {
		return err
	}
	if res.Code != wire.CodeOK {
		return fmt.Errorf("api: setting %s: %w", key, res.Code.Err())
	}
	return nil
}

// ephSwitch is the stored ephemeral switch; Stamp orders it against the
// switch the peers gossip (ephemeral_ring.go), the newest winning.
type ephSwitch struct {
	Enabled bool  `json:"enabled"`
	Stamp   int64 `json:"stamp"`
}

// storedEphSwitch is the switch as this node's applied state holds it.
func (s *Server) storedEphSwitch() (ephSwitch, bool) {
	b, ok := s.systemGet(ephSwitchKey)
	var sw ephSwitch
	if !ok || json.Unmarshal(b, &sw) != nil {
		return sw, false
	}
	return sw, true
}

// ephGranted says whether tenant may use ephemeral queues when
// QUEEN_EPHEMERAL_REQUIRE_GRANT is on. A grant this node has not applied
// yet (made through another node a moment ago) is looked for again once
// it has caught up, so a tenant granted is never refused; a revoke takes
// effect here once this node applies it, a moment after it is answered.
func (s *Server) ephGranted(tenant wire.ID) bool {
	key := ephGrantPrefix + tenant.String()
	if _, ok := s.systemGet(key); ok {
		return true
	}
	if s.catchUpSystem() != nil {
		return false
	}
	_, ok := s.systemGet(key)
	return ok
}

// catchUpSystem makes this node's replica of the settings current, within
// raftgroups.CatchUpWait (catch_up.go).
func (s *Server) catchUpSystem() error {
	if s.engine == nil {
		return nil
	}
	ctx, cancel := s.requestCtx(raftgroups.CatchUpWait)
	defer cancel()
	return s.engine.Barrier(ctx, s.engine.KVGroup(tenancy.SystemTenant))
}

var errEphNotGranted = &apiError{http.StatusForbidden, "ephemeral_not_granted",
	"this tenant has no ephemeral grant (QUEEN_EPHEMERAL_REQUIRE_GRANT; an operator grants it with POST /api/v1/system/quota)"}

// quotaBody is a grant of a kind of resource to a tenant (spec §2.17
// "Quotas", route 86). Only the ephemeral grant is kept so far.
type quotaBody struct {
	Tenant  string `json:"tenant"`
	Kind    string `json:"kind"`
	Granted *bool  `json:"granted,omitempty"`
}

// quotaTenant reads and checks a quota request's tenant and kind. The
// routes are the operator's (authorizeOperator): a tenant could grant
// itself.
func quotaTenant(tenant, kind string) (wire.ID, error) {
	if kind != "ephemeral" {
		return wire.ID{}, badRequest(`kind must be "ephemeral" (the only grant kept so far)`)
	}
	if tenant == "" {
		return wire.ID{}, badRequest("tenant is required")
	}
	id, err := tenancy.Parse(tenant)
	if err != nil {
		return id, badRequest("tenant must be a tenant's UUID")
	}
	return id, nil
}

// quotaGet is GET /api/v1/system/quota?tenant=&kind=ephemeral.
func (s *Server) quotaGet(ctx *fasthttp.RequestCtx) error {
	a := ctx.QueryArgs()
	id, err := quotaTenant(string(a.Peek("tenant")), string(a.Peek("kind")))
	if err != nil {
		return err
	}
	if err := s.catchUpSystem(); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"tenant": id.String(), "kind": "ephemeral", "granted": s.ephGranted(id)})
	return nil
}

// quotaSet is POST /api/v1/system/quota {tenant, kind:"ephemeral",
// granted (default true)}: grants or revokes, cluster-wide and durably.
func (s *Server) quotaSet(ctx *fasthttp.RequestCtx) error {
	var b quotaBody
	if err := readJSON(ctx, &b); err != nil {
		return err
	}
	id, err := quotaTenant(b.Tenant, b.Kind)
	if err != nil {
		return err
	}
	granted := b.Granted == nil || *b.Granted
	var value []byte
	if granted {
		value = []byte(`{"granted":true}`)
	}
	if err := s.systemPut(ephGrantPrefix+id.String(), value); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"tenant": id.String(), "kind": "ephemeral", "granted": granted})
	return nil
}
