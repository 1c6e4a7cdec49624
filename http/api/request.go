package api

import (
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// tenantAndBody resolves the tenant a request belongs to and decodes its
// JSON body into v: the start of every handler that takes a body.
func (s *Server) tenantAndBody(ctx *fasthttp.RequestCtx, v any) (wire.ID, error) {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return tenant, err
	}
	return tenant, readJSON(ctx, v)
}

// checkEntries bounds the entries of the fetch-family routes (spec §2.16).
func checkEntries(n int) error {
	if n == 0 || n > maxFetchEntries {
		return badRequest("entries must hold 1..1024 items")
	}
	return nil
}
