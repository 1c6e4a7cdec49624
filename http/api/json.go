package api

import (
	"encoding/json"

	"github.com/valyala/fasthttp"
)

// writeJSON answers v as JSON with the given status.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = fasthttp.StatusInternalServerError, []byte(`{"error":"response encoding failed","code":"internal"}`)
	}
	writeRawJSON(ctx, status, b)
}

// writeRawJSON answers already-encoded JSON.
func writeRawJSON(ctx *fasthttp.RequestCtx, status int, b []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// readJSON decodes the request body into v. Unknown fields are ignored (a
// newer client may send more); malformed JSON is a 400 and nothing happens.
func readJSON(ctx *fasthttp.RequestCtx, v any) error {
	body := ctx.PostBody()
	if len(body) == 0 {
		return badRequest("request body is empty")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("malformed JSON: " + err.Error())
	}
	return nil
}
