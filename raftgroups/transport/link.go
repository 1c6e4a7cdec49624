package transport

import (
	"net/http"
	"strings"

	"github.com/queen-mq/queen/crypto/secret"
)

// The link is how a standby cluster (QUEEN_STANDBY_OF) reads a source
// cluster: committed entries and snapshots of each group, read-only, on the
// same raft listeners (group N on raft port + N, TLS when the node has it),
// under LinkPrefix. It has its own token, QUEEN_LINK_TOKEN, in its own
// header: a standby's operator gets the right to read the log, never the
// right to vote, append, install snapshots or call /node/v1/ that the raft
// token gives. So neither token is accepted in the other's place, and a
// node without a link token has no link route at all (404).
const (
	LinkTokenHeader = "X-Queen-Link-Token"
	// LinkPrefix is the path prefix of every link route.
	LinkPrefix = "/link/v1/"
)

// linkMount serves Config.Link under LinkPrefix behind linkGuard when a
// link token is configured; otherwise the prefix is left to the mux's 404.
func (t *Transport) linkMount(mux *http.ServeMux) {
	if t.cfg.LinkToken == "" || t.cfg.Link == nil {
		return
	}
	mux.Handle(LinkPrefix, t.linkGuard(t.cfg.Link))
}

// linkGuard checks the link token from the headers alone, in constant time,
// before the handler (and so any read of the body) runs. A wrong or absent
// token, or the raft token presented as a link token, is answered 401 and
// the connection closed. Only GET and HEAD pass: the link is read-only.
func (t *Transport) linkGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented := r.Header.Get(LinkTokenHeader)
		// The raft token is compared too, whatever the link token says:
		// boot refuses equal tokens, but a configuration built in code
		// (tests, embedders) must not turn the raft token into a link one.
		if !t.link.Match(presented) || t.token.Match(presented) {
			t.linkRefused.Add(1)
			w.Header().Set("Connection", "close")
			http.Error(w, "bad link token", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Connection", "close")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// linkAsRaft reports a request to a raft or node route that carries the
// link token, as its raft token or in the link header: refused even on a
// node without a raft token, where those routes check nothing, so a
// standby's credential never opens them.
func (t *Transport) linkAsRaft(r *http.Request) bool {
	if !t.link.Set() {
		return false
	}
	if t.link.Match(r.Header.Get(TokenHeader)) {
		return true
	}
	return strings.TrimSpace(r.Header.Get(LinkTokenHeader)) != ""
}

// refuseLinkAsRaft answers a request linkAsRaft caught.
func (t *Transport) refuseLinkAsRaft(w http.ResponseWriter) {
	t.refused.Add(1)
	w.Header().Set("Connection", "close")
	http.Error(w, "a link token is not a raft token", http.StatusUnauthorized)
}

// LinkRefused counts link requests this node answered with 401.
func (t *Transport) LinkRefused() uint64 { return t.linkRefused.Load() }

// linkMatcher is the matcher of cfg's link token.
func linkMatcher(cfg Config) secret.Matcher { return secret.NewMatcher(cfg.LinkToken) }
