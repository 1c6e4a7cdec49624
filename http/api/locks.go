package api

import (
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// Locks and semaphores (spec §1.9, §2.13).

var lockOps = map[string]uint8{"acquire": wire.LockAcquire, "renew": wire.LockRenew, "release": wire.LockRelease, "get": wire.LockGet}

type lockOpRequest struct {
	Op         string `json:"op"`
	Name       string `json:"name"`
	TTLSeconds uint32 `json:"ttlSeconds"`
	Owner      string `json:"owner"`
	Limit      uint32 `json:"limit"`
	Token      uint64 `json:"token"`
	Slot       uint32 `json:"slot"`
}

type lockHolderAnswer struct {
	Slot      uint32  `json:"slot"`
	Owner     string  `json:"owner"`
	Token     uint64  `json:"token"`
	ExpiresAt *string `json:"expiresAt"`
}

// lockGuard is the KV check a transaction carries to be fenced by a lock.
type lockGuard struct {
	Op       string `json:"op"`
	NS       string `json:"ns"`
	Key      string `json:"key"`
	Expect   uint64 `json:"expect"`
	Required bool   `json:"required"`
}

// locks is POST /api/v1/locks.
func (s *Server) locks(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var req struct {
		Operations []lockOpRequest `json:"operations"`
	}
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	if len(req.Operations) == 0 || len(req.Operations) > wire.MaxLockOpsPerCall {
		return badRequest("operations must hold 1..64 items")
	}
	cmd := wire.LocksCmd{Tenant: tenant}
	for i, r := range req.Operations {
		op, ok := lockOps[r.Op]
		if !ok {
			return badRequest("operation " + strconv.Itoa(i) + ": op must be acquire, renew, release or get")
		}
		if r.Name == "" || len(r.Name)+6 > wire.MaxKVKeyBytes {
			return badRequest("operation " + strconv.Itoa(i) + ": name must be 1..506 bytes")
		}
		if r.Limit > wire.MaxLockPermits {
			return badRequest("operation " + strconv.Itoa(i) + ": limit must be at most 1024")
		}
		if op == wire.LockAcquire && r.TTLSeconds == 0 {
			r.TTLSeconds = 30
		}
		cmd.Ops = append(cmd.Ops, wire.LockOp{Op: op, Name: r.Name, TTLSec: r.TTLSeconds, Owner: r.Owner,
			Limit: r.Limit, Token: r.Token, Slot: r.Slot})
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Locks(rctx, &cmd)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(res.Ops))
	for i, o := range res.Ops {
		r := req.Operations[i]
		a := map[string]any{"index": i, "op": r.Op, "name": r.Name}
		switch r.Op {
		case "acquire":
			a["acquired"] = o.OK
		case "renew":
			a["renewed"] = o.OK
		case "release":
			a["released"] = o.OK
		}
		if o.OK && r.Op != "get" && r.Op != "release" {
			a["slot"], a["token"], a["owner"], a["expiresAt"] = o.Slot, o.Token, r.Owner, expiresAt(o.ExpiresMs)
			a["guard"] = lockGuard{Op: "check", NS: wire.LocksNamespace, Key: r.Name + "#" + strconv.FormatUint(uint64(o.Slot), 10),
				Expect: o.Token, Required: true}
		}
		if o.Reason != "" {
			a["reason"] = o.Reason
		}
		if len(o.Holders) > 0 || r.Op == "get" || !o.OK {
			holders := make([]lockHolderAnswer, len(o.Holders))
			for j, h := range o.Holders {
				holders[j] = lockHolderAnswer{Slot: h.Slot, Owner: h.Owner, Token: h.Token, ExpiresAt: expiresAt(h.ExpiresMs)}
			}
			a["holders"] = holders
		}
		out[i] = a
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"results": out})
	return nil
}
