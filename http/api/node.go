package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
)

// Node routes: what peers ask this node (a membership request forwarded
// to the leader, an ephemeral request relayed to a partition's owner, the
// ephemeral probes and hand-over). They arrive over the node channel, on
// group 0's raft listener (raftgroups nodecall.go): TLS between nodes when
// it is on, and the raft token checked before any body byte. The broker
// port never serves them, so a peer needs no client credential and a
// client cannot pose as a peer there. A relayed public route keeps its
// handler; only where it arrives from differs (fromPeer).

// NodeLink makes and receives node-to-node calls: raftgroups.Host, or a
// stand-in in tests without raft.
type NodeLink interface {
	CallPeer(ctx context.Context, id uint64, method, route string, header http.Header, body io.Reader) (*http.Response, error)
	SetNodeHandler(http.Handler)
}

// fromPeerKey marks a request that came over the node channel.
const fromPeerKey = "queen.fromPeer"

func fromPeer(ctx *fasthttp.RequestCtx) bool {
	v, _ := ctx.UserValue(fromPeerKey).(bool)
	return v
}

// relayedRoute is the node route of a public path a peer relays, or "":
// the membership routes past /api/v1/system/raft/ and the ephemeral ones
// past /api/v1/ (/api/v1/ephemeral/push → ephemeral/push). A node route's
// path (a relayed request relayed on) is its own. path is as the client
// sent it (escaped), as the router matches it, so the peer sees the same
// path arguments.
func relayedRoute(path string) string {
	if rest, ok := strings.CutPrefix(path, raftgroups.NodePath("")); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(path, "/api/v1/system/raft/"); ok && strings.HasPrefix(rest, "membership") {
		return rest
	}
	if rest, ok := strings.CutPrefix(path, "/api/v1/"); ok && strings.HasPrefix(rest, "ephemeral/") {
		return rest
	}
	return ""
}

// peerOnlyRoutes are node routes with no public twin.
func (s *Server) peerOnlyRoutes() []route {
	return []route{
		{post, "ephemeral/_ready", 0, s.ephReady},
		{post, "ephemeral/_leaving", 0, s.ephLeaving},
		{post, "ephemeral/_adopt", 0, s.ephAdopt},
	}
}

// nodeHandler serves the node routes: the relayed public routes and the
// peer-only ones.
func (s *Server) nodeHandler() http.Handler {
	r := router.New()
	r.HandleMethodNotAllowed = false
	r.RedirectTrailingSlash = false
	r.NotFound = noSuchRoute
	nodeRoutes := s.peerOnlyRoutes()
	for _, rt := range s.routes() {
		if node := relayedRoute(rt.path); node != "" {
			rt.path = node
			nodeRoutes = append(nodeRoutes, rt)
		}
	}
	for _, rt := range nodeRoutes {
		rt.path = raftgroups.NodePath(rt.path)
		r.Handle(rt.method, rt.path, s.nodeWrap(rt))
	}
	return s.adaptNode(r.Handler)
}

// nodeWrap runs a route for a peer: no JWT (the peer checked the client's,
// and the raft token stands for the peer), the error envelope, a panic
// answered with a 500, and the request counted per route.
func (s *Server) nodeWrap(rt route) fasthttp.RequestHandler {
	m := newRouteMetrics(s.metrics, "queen_node", rt)
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("http: node route panic", "route", rt.path, "panic", fmt.Sprint(v))
				writeJSON(ctx, http.StatusInternalServerError, errorBody{Error: "internal error", Code: "internal"})
			}
			m.observe(ctx.Response.StatusCode(), start)
		}()
		ctx.SetUserValue(fromPeerKey, true)
		if err := rt.handle(ctx); err != nil {
			writeError(ctx, err)
		}
	}
}

// adoptPath is the node route whose body may exceed QUEEN_MAX_BODY_BYTES:
// a hand-over carries up to a node's whole ephemeral store.
var adoptPath = raftgroups.NodePath("ephemeral/_adopt")

// adaptNode runs the fasthttp handler h for a net/http request from the
// node channel: the body is read whole (bounded), the request copied into
// a RequestCtx, and the answer copied back.
func (s *Server) adaptNode(h fasthttp.RequestHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := int64(s.cfg.MaxBodyBytes)
		if r.URL.Path == adoptPath {
			// Payloads travel base64-encoded, with per-message fields.
			limit = max(limit, 2*s.eph.cfg.Store.MaxBytes+1<<20)
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			} else {
				http.Error(w, "unreadable body: "+err.Error(), http.StatusBadRequest)
			}
			return
		}
		var req fasthttp.Request
		req.Header.SetMethod(r.Method)
		req.SetRequestURI(r.URL.RequestURI())
		for k, vs := range r.Header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		req.SetBodyRaw(body)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, nil, fasthttpLogger{s.log})
		h(&ctx)
		for k, v := range ctx.Response.Header.All() {
			switch string(k) {
			case fasthttp.HeaderContentLength, fasthttp.HeaderConnection, fasthttp.HeaderServer, fasthttp.HeaderDate:
				continue
			}
			w.Header().Add(string(k), string(v))
		}
		w.WriteHeader(ctx.Response.StatusCode())
		_, _ = w.Write(ctx.Response.Body())
	})
}

// peerAnswer is a peer's answer to a node call, read whole.
type peerAnswer struct {
	status int
	header http.Header
	body   []byte
}

// callPeer makes one node call to peer id over link and reads the answer,
// at most limit bytes of it. An error means no answer (unreachable, timed
// out, no node link); a status is the peer's.
func callPeer(ctx context.Context, link NodeLink, id uint64, method, route string, header http.Header, body []byte, limit int64) (peerAnswer, error) {
	if link == nil {
		return peerAnswer{}, errors.New("no node channel (a node without raft)")
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	resp, err := link.CallPeer(ctx, id, method, route, header, rd)
	if err != nil {
		return peerAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return peerAnswer{}, fmt.Errorf("node %d %s: %w", id, route, err)
	}
	return peerAnswer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// errNotRelayed marks a relay the peer refused before running its route.
var errNotRelayed = errors.New("not relayed")

// relayRan says whether a failed relay to a peer may have run there: not
// when the call never left (an unknown peer, a refused connection) or the
// peer refused it before its route ran; otherwise (a timeout, a connection
// cut after the request was sent) it may have.
func relayRan(err error) bool {
	var op *net.OpError
	return !errors.Is(err, errNotRelayed) && !errors.Is(err, raftgroups.ErrUnknownPeer) &&
		!(errors.As(err, &op) && op.Op == "dial")
}

// relay sends the client's request to peer id's node route of the same
// path and query, with header, and copies the answer's status, content
// type, the headers in keep and body to the client.
func (s *Server) relay(ctx *fasthttp.RequestCtx, id uint64, header http.Header, timeout time.Duration, keep ...string) (int, error) {
	if header == nil {
		header = http.Header{}
	}
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 {
		header.Set("Content-Type", string(ct))
	}
	var body []byte
	if b := ctx.PostBody(); len(b) > 0 {
		body = b
	}
	ans, err := s.callRelayed(ctx, id, header, body, timeout)
	if err != nil {
		return 0, err
	}
	ct := ans.header.Get("Content-Type")
	if (ans.status == http.StatusUnauthorized || ans.status == http.StatusServiceUnavailable) && !strings.HasPrefix(ct, "application/json") {
		// Refused by the channel (another raft token) or its handler is not
		// installed yet: the route did not run there.
		return ans.status, fmt.Errorf("%w: node %d refused the node call: %d %s", errNotRelayed, id, ans.status, strings.TrimSpace(string(ans.body)))
	}
	ctx.SetStatusCode(ans.status)
	if ct != "" {
		ctx.Response.Header.SetContentType(ct)
	}
	for _, h := range keep {
		if v := ans.header.Get(h); v != "" {
			ctx.Response.Header.Set(h, v)
		}
	}
	ctx.SetBody(ans.body)
	return ans.status, nil
}

// callRelayed makes the client's request, with header and body, to peer
// id's node route of the same path and query, and reads the answer.
func (s *Server) callRelayed(ctx *fasthttp.RequestCtx, id uint64, header http.Header, body []byte, timeout time.Duration) (peerAnswer, error) {
	route := relayedRoute(string(ctx.URI().PathOriginal()))
	if q := ctx.URI().QueryString(); len(q) > 0 {
		route += "?" + string(q)
	}
	c, cancel := context.WithTimeout(s.base, timeout)
	defer cancel()
	return callPeer(c, s.node, id, string(ctx.Method()), route, header, body, int64(s.cfg.MaxBodyBytes)+1<<20)
}
