package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
)

// Request bodies are streamed (fasthttp's StreamRequestBody) and read by
// readBody only after the request passed authorization, into a buffer that
// grows as bytes arrive. fasthttp's own reading allocates the declared
// Content-Length before any handler runs, so connections that declared
// 64 MiB and sent nothing held 64 MiB each, even without a token.

// Defaults of the connection and body limits (cmd/queen reads them from
// QUEEN_HTTP_*).
const (
	DefaultMaxBodyBytes     = 64 << 20 // QUEEN_MAX_BODY_BYTES, spec §1.1
	DefaultMaxBufferedBytes = 1 << 30
	DefaultMaxConnections   = 10000
	DefaultMaxConnsPerIP    = 1024
)

// drainOnRefusal is how much of a refused body is read and dropped before
// the connection closes (refuseBody).
const drainOnRefusal = 256 << 10

// firstBodyChunk is the most a body buffer starts with; it doubles as bytes
// arrive, up to the declared length or the cap.
const firstBodyChunk = 64 << 10

// errBodyTooLarge is a body over QUEEN_MAX_BODY_BYTES: a plain-text 413
// (spec §2.1), as fasthttp answers it.
var errBodyTooLarge = errors.New("request body exceeds QUEEN_MAX_BODY_BYTES")

// errBodyBudget refuses a body that would take the bytes held by all
// requests' bodies over QUEEN_HTTP_MAX_BUFFERED_BYTES: 429 overloaded with
// Retry-After, as a full planner queue is.
var errBodyBudget = fmt.Errorf("%w: request bodies being read hold QUEEN_HTTP_MAX_BUFFERED_BYTES", raftgroups.ErrOverloaded)

// bodyBudget counts the body buffer bytes all requests hold.
type bodyBudget struct {
	used  atomic.Int64
	limit int64
}

func (b *bodyBudget) take(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *bodyBudget) give(n int) { b.used.Add(-int64(n)) }

// readBody reads the request's body into memory within the body cap and
// the budget, and returns how much budget it holds until the request is
// answered.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) (held int, err error) {
	stream := ctx.RequestBodyStream()
	declared := ctx.Request.Header.ContentLength() // -1: chunked
	if stream == nil || declared == 0 {
		return 0, nil
	}
	limit := s.cfg.MaxBodyBytes
	if declared > limit {
		return 0, errBodyTooLarge
	}
	want := limit // the most this body may grow to
	if declared > 0 {
		want = declared
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if len(buf) == want {
				if declared > 0 || !moreBytes(stream) {
					break
				}
				return held, errBodyTooLarge
			}
			grown := min(want, max(2*cap(buf), firstBodyChunk))
			if !s.bodies.take(grown - cap(buf)) {
				return held, errBodyBudget
			}
			held += grown - cap(buf)
			buf = append(make([]byte, 0, grown), buf...)
		}
		n, err := stream.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return held, badRequest("unreadable request body: " + err.Error())
		}
	}
	ctx.Request.SetBodyRaw(buf)
	return held, nil
}

// moreBytes reports whether a chunked body goes on past what was read.
func moreBytes(r io.Reader) bool {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// closeIfBodyUnread closes the connection after a request answered without
// reading its body: fasthttp would otherwise wait for the rest of it to
// reuse the connection.
func closeIfBodyUnread(ctx *fasthttp.RequestCtx) {
	if ctx.Request.Header.ContentLength() != 0 {
		ctx.SetConnectionClose()
	}
}

// refuseBody answers a request whose body cannot be read, and closes the
// connection: the rest of the body is not worth keeping. A body declared
// at most drainOnRefusal bytes long is read and dropped first, within a
// second, as Go's own server does: closing a socket with unread bytes
// resets the connection, and a client still sending its body then sees the
// reset, not the answer (TestBufferedBodyBudget saw a 200 KiB push reset
// instead of answered 429). A longer or chunked body is not waited for.
func refuseBody(ctx *fasthttp.RequestCtx, err error) {
	if n := ctx.Request.Header.ContentLength(); n > 0 && n <= drainOnRefusal {
		if stream := ctx.RequestBodyStream(); stream != nil {
			_ = ctx.Conn().SetReadDeadline(time.Now().Add(time.Second))
			_, _ = io.CopyN(io.Discard, stream, drainOnRefusal)
		}
	}
	ctx.SetConnectionClose()
	if errors.Is(err, errBodyTooLarge) {
		ctx.Error(err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	writeError(ctx, err)
}
