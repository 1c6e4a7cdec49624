package transport

import (
	"bytes"
	"errors"
	"log"
	"net/http"
	"strings"
	"time"

	"crypto/tls"
	"crypto/x509"
)

// url is the address of a route on the peer at target, over TLS when this
// node has it: a node with TLS never sends raft bytes in plaintext.
func (t *Transport) url(target, path string) string {
	return t.scheme + "://" + target + path
}

// handshakeLog turns net/http's "TLS handshake error" lines into a counted,
// rate-limited warning that says what to fix. net/http is the only one who
// sees the handshake fail (it runs it lazily, per connection).
func (t *Transport) handshakeLog() *log.Logger {
	return log.New(handshakeWriter{t}, "", 0)
}

type handshakeWriter struct{ t *Transport }

func (w handshakeWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	t := w.t
	if !strings.Contains(line, "TLS handshake error") {
		t.cfg.Logger.Debug("raft: listener", "group", t.cfg.Group, "msg", line)
		return len(p), nil
	}
	// A connection closed before a byte of TLS is not a refusal: the
	// senders' reachability probe (GetConnection) is exactly that.
	if strings.HasSuffix(line, ": EOF") || strings.HasSuffix(line, "connection reset by peer") {
		return len(p), nil
	}
	t.tlsRefused.Add(1)
	if t.rateLimited("tls-in") {
		return len(p), nil
	}
	from, reason := line, ""
	if i := strings.Index(line, " from "); i >= 0 {
		from = line[i+len(" from "):]
		if j := strings.Index(from, ": "); j >= 0 {
			from, reason = from[:j], from[j+2:]
		}
	}
	t.cfg.Logger.Warn("raft: refused a peer's connection: its TLS handshake failed (no certificate, one not signed by QUEEN_RAFT_TLS_CA, or plaintext)",
		"from", from, "group", t.cfg.Group, "reason", reason, "refused_total", t.tlsRefused.Load())
	return len(p), nil
}

// noteSendErr warns, at most every 10 s, when a call to a peer failed in
// TLS: the other side refused this node's certificate, or this node
// refused the peer's.
func (t *Transport) noteSendErr(target string, err error) {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var record tls.RecordHeaderError
	tlsErr := errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &record) || strings.Contains(err.Error(), "tls: ")
	if !tlsErr || t.rateLimited("tls-out "+target) {
		return
	}
	t.cfg.Logger.Warn("raft: TLS with a peer failed; every node needs QUEEN_RAFT_TLS_CERT and _KEY signed by the same QUEEN_RAFT_TLS_CA, naming the host it is dialled at",
		"peer", target, "group", t.cfg.Group, "tls", t.cfg.TLS.Mode(), "err", err)
}

// notePlainToTLS explains the 400 a TLS listener gives a plaintext
// request: this node has no TLS between nodes and its peer has.
func (t *Transport) notePlainToTLS(target string, status int) {
	if t.cfg.TLS != nil || status != http.StatusBadRequest || t.rateLimited("plain "+target) {
		return
	}
	t.cfg.Logger.Warn("raft: a peer refused this node's plaintext request (400): it likely serves TLS between nodes; set QUEEN_RAFT_TLS_CERT, _KEY and _CA as on the peers",
		"peer", target, "group", t.cfg.Group)
}

// rateLimited reports whether a warning under key was logged in the last
// 10 s, and otherwise records that it is logged now: the breaker retries
// every send, and a line per retry helps nobody.
func (t *Transport) rateLimited(key string) bool {
	now := time.Now()
	if v, ok := t.warnedAt.Load(key); ok && now.Sub(v.(time.Time)) < 10*time.Second {
		return true
	}
	t.warnedAt.Store(key, now)
	return false
}
