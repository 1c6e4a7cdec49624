package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// httpError is an answer the proxy gives itself: {"code","error"}.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.code + ": " + e.msg }

func newError(status int, code, msg string) *httpError { return &httpError{status, code, msg} }

// The data plane's answers whose bodies the seed fixes word for word.
var (
	errMissingCredential = newError(http.StatusUnauthorized, "unauthorized", "missing bearer credential")
	errBadCredential     = newError(http.StatusUnauthorized, "unauthorized", "invalid credential")
	errKeyMismatch       = newError(http.StatusForbidden, "forbidden", "key/cluster mismatch")
	errNotPermitted      = newError(http.StatusForbidden, "forbidden", "operation not permitted for this credential")
	errSuspended         = newError(http.StatusForbidden, "cluster_suspended", "the cluster is suspended")
	errPushBlocked       = newError(http.StatusForbidden, "push_blocked", "pushes are blocked for this cluster")
	errNotInPlan         = newError(http.StatusForbidden, "feature_not_in_plan", "the cluster's plan does not include this feature")
	errRouteBlocked      = newError(http.StatusNotFound, "route_blocked", "route not available through the proxy")
	errNotFound          = newError(http.StatusNotFound, "not_found", "not found")
	errNoCluster         = newError(http.StatusMisdirectedRequest, "cluster_unknown", "no cluster is served at this host")
	errKeysOnConsole     = newError(http.StatusUnauthorized, "unauthorized", "API keys are not accepted on the console")
)

// status maps an error to its HTTP answer, in one place: the proxy's own
// answers as they are, the state layer's sentinels by kind.
func status(err error) *httpError {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(err, ErrUnavailable):
		return newError(http.StatusServiceUnavailable, "unavailable", "the proxy's state cannot be read right now (no majority?)")
	case errors.Is(err, ErrConflict):
		return newError(http.StatusConflict, "conflict", err.Error())
	}
	return newError(http.StatusInternalServerError, "internal", "internal error")
}

func writeJSON(ctx *fasthttp.RequestCtx, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"code":"internal","error":"response encoding failed"}`)
	}
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// writeError answers err as {"code","error"}.
func writeError(ctx *fasthttp.RequestCtx, err error) {
	he := status(err)
	writeJSON(ctx, he.status, map[string]string{"code": he.code, "error": he.msg})
}

// writeRetry answers a limit's refusal with when to try again.
func writeRetry(ctx *fasthttp.RequestCtx, wait time.Duration, code, msg string) {
	ctx.Response.Header.Set("Retry-After", retryAfter(wait))
	writeError(ctx, newError(http.StatusTooManyRequests, code, msg))
}
