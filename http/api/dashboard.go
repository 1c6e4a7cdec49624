package api

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/ui"
)

// dashboard is GET /: the web dashboard's page (http/ui). It is public,
// as in Queen (spec §2.2): the page holds no data, and every call it
// makes carries the user's token and meets its route's level.
func (s *Server) dashboard(ctx *fasthttp.RequestCtx) error {
	ServeAsset(ctx, ui.Page())
	return nil
}

// dashboardAsset is GET /assets/*: the page's scripts, styles and icons.
func (s *Server) dashboardAsset(ctx *fasthttp.RequestCtx) error {
	a, ok := ui.Lookup(pathArg(ctx, "path"))
	if !ok {
		return &apiError{http.StatusNotFound, "no_such_asset", "not found"}
	}
	ServeAsset(ctx, a)
	return nil
}

// ServeAsset answers a with its validator, or 304 when the browser holds
// it already. no-cache makes the browser revalidate each load, so a new
// binary's files are picked up at once without renaming them.
func ServeAsset(ctx *fasthttp.RequestCtx, a ui.Asset) {
	h := &ctx.Response.Header
	h.Set("ETag", a.ETag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if string(ctx.Request.Header.Peek("If-None-Match")) == a.ETag {
		ctx.SetStatusCode(http.StatusNotModified)
		return
	}
	h.SetContentType(a.ContentType)
	ctx.SetStatusCode(http.StatusOK)
	ctx.SetBody(a.Body)
}
