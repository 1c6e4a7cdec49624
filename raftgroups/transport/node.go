package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls"
)

// Node-to-node HTTP calls (anything between nodes that is not raft: a
// hand-over, a question to a peer) go to the peer's group 0 raft
// listener under nodePrefix, not to its broker port. The broker port is
// for clients and never terminates TLS (spec §5.1); the raft listener is
// TLS-only when TLS between nodes is on, mutual with a CA, and behind the
// raft token, so a call between nodes gets the same protection as raft
// itself without a second listener or certificate to manage.
const nodePrefix = "/node/v1/"

// NodePath is the path of a node-to-node route, e.g. NodePath("handover").
func NodePath(route string) string { return nodePrefix + route }

// nodeGuard checks the token from the headers, before any body byte, as
// guard does for raft routes; any method is allowed. A body that stops
// arriving for Timeouts.Stall ends the request, so a peer cannot hold a
// handler by sending slowly.
func (t *Transport) nodeGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.cfg.Token != "" && !t.token.Match(r.Header.Get(TokenHeader)) {
			t.refused.Add(1)
			w.Header().Set("Connection", "close")
			http.Error(w, "bad raft token", http.StatusUnauthorized)
			return
		}
		if t.linkAsRaft(r) {
			t.refuseLinkAsRaft(w)
			return
		}
		r.Body = &deadlineReader{r: r.Body, rc: http.NewResponseController(w), timeout: t.cfg.Timeouts.Stall}
		next.ServeHTTP(w, r)
	})
}

// NodeClient makes node-to-node HTTP calls: over TLS when the node has it
// (presenting its certificate when mutual), with the raft token, every
// call bounded.
type NodeClient struct {
	token   string
	scheme  string
	timeout time.Duration
	client  *http.Client
}

// NewNodeClient returns a client for node-to-node calls. A call whose
// context has no deadline gets timeout (10 s when zero); connecting and
// the TLS handshake are bounded by to's Dial and Open. The wait for the
// answer is bounded by the context alone: a relayed long-poll pop answers
// after its own wait, which may be longer than timeout.
func NewNodeClient(tc *nodetls.Config, token string, timeout time.Duration, to Timeouts) *NodeClient {
	to.setDefaults()
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ht := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: to.Dial, KeepAlive: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: to.Open,
	}
	c := &NodeClient{token: token, scheme: "http", timeout: timeout, client: &http.Client{Transport: ht}}
	if tc != nil {
		c.scheme = "https"
		ht.TLSClientConfig = tc.Client()
	}
	return c
}

// Do calls route (see NodePath; it may end in a query) on the peer whose
// group 0 raft address is target, with header's fields besides the token.
// The caller closes the answer's body. A 401 means the peer refused this
// node's token.
func (c *NodeClient) Do(ctx context.Context, target, method, route string, header http.Header, body io.Reader) (*http.Response, error) {
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+target+NodePath(route), body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("node call %s %s: %w", target, route, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set(TokenHeader, c.token)
	resp, err := c.client.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("node call %s %s: %w", target, route, err)
	}
	// The body is read after Do returns: the timeout ends when it is closed.
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// Close drops idle connections; the client holds no goroutine otherwise.
func (c *NodeClient) Close() { c.client.CloseIdleConnections() }

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
