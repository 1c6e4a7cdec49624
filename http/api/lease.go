package api

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// Lease extension bounds: the default of spec §2.7, and at most the
// longest lease a pop may ask for.
const (
	defaultExtendSeconds = 60
	maxLeaseSeconds      = 7 * 24 * 3600
)

type leaseExtendRequest struct {
	Seconds *int64 `json:"seconds"`
}

type leaseExtendAnswer struct {
	LeaseID        string  `json:"leaseId"`
	Success        bool    `json:"success"`
	Renewed        int     `json:"renewed"`
	NewExpiresAt   *string `json:"newExpiresAt"`
	ExpiresAt      *string `json:"expiresAt"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
}

// leaseExtend is POST /api/v1/lease/:leaseId/extend (spec §2.7): the lease
// now expires seconds (default 60) from now; a shared lease, in every
// partition holding it, and renewed counts them. A lease that is gone or
// expired is answered 200 with success false and renewed 0, as Queen does;
// a leaseId that is not a UUID is a 400.
func (s *Server) leaseExtend(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	raw := pathArg(ctx, "leaseId")
	id, err := wire.ParseID(raw)
	if err != nil {
		return badRequest("leaseId is not a lease id")
	}
	seconds := int64(defaultExtendSeconds)
	if len(ctx.PostBody()) > 0 {
		var req leaseExtendRequest
		if err := readJSON(ctx, &req); err != nil {
			return err
		}
		if req.Seconds != nil {
			seconds = *req.Seconds
		}
	}
	if seconds < 1 || seconds > maxLeaseSeconds {
		return badRequest("seconds must be 1..604800")
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.ExtendLease(rctx, &wire.ExtendLeaseCmd{Tenant: tenant, LeaseID: id, Ms: uint32(seconds * 1000)})
	if err != nil {
		return err
	}
	ans := leaseExtendAnswer{LeaseID: raw}
	switch res.Code {
	case wire.CodeOK:
		at := isoMillis(res.ExpiresMs)
		ans.Success, ans.Renewed = true, int(res.Renewed)
		ans.NewExpiresAt, ans.ExpiresAt, ans.LeaseExpiresAt = &at, &at, &at
	case wire.CodeLeaseNotFound:
	default:
		return res.Code.Err()
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}
