package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
)

// recordingBody is a request body that records whether anyone read it.
type recordingBody struct {
	r    io.Reader
	read atomic.Bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

// linkHandler records that it ran and reads the whole body.
type linkHandler struct{ calls atomic.Int64 }

func (h *linkHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "linked "+r.URL.Path)
}

func startLinkTransport(t *testing.T, cfg Config) (*Transport, string) {
	t.Helper()
	addr := freeAddr(t)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	f := NewFactory(cfg)
	tr := f.Create(config.NodeHostConfig{RaftAddress: addr}, (&receiver{}).handle, func(pb.Chunk) bool { return true }).(*Transport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, addr
}

// expectClient sends bodies only after the server asks for them (Expect:
// 100-continue, which net/http's server answers when the handler first
// reads the body): a body the server never reads is never sent, so the
// recordingBody on this side says whether the server read it.
func expectClient() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 15 * time.Second}}
}

func linkGet(t *testing.T, c *http.Client, url, header, token string) (*http.Response, string, *recordingBody) {
	t.Helper()
	body := &recordingBody{r: strings.NewReader("a body the guard must not read")}
	req, err := http.NewRequest(http.MethodGet, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 30
	req.Header.Set("Expect", "100-continue")
	if header != "" {
		req.Header.Set(header, token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), body
}

// A wrong or absent link token, or the raft token presented as the link
// token, is answered 401 with the connection closed before a byte of the
// body is read; the right one reaches the handler.
func TestLinkTokenRefusedBeforeTheBody(t *testing.T) {
	h := &linkHandler{}
	server, addr := startLinkTransport(t, Config{Token: "raft-tok", AcceptTokens: []string{"raft-old"}, LinkToken: "link-tok", Link: h})
	c := expectClient()
	url := "http://" + addr + LinkPrefix + "info"
	for _, tc := range []struct{ name, header, token string }{
		{"absent", "", ""},
		{"wrong", LinkTokenHeader, "nope"},
		{"raft token as link token", LinkTokenHeader, "raft-tok"},
		{"rotated raft token as link token", LinkTokenHeader, "raft-old"},
		{"link token in the raft header", TokenHeader, "link-tok"},
	} {
		resp, text, body := linkGet(t, c, url, tc.header, tc.token)
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close || !strings.Contains(text, "bad link token") {
			t.Fatalf("%s: got %d close=%v %q", tc.name, resp.StatusCode, resp.Close, text)
		}
		if body.read.Load() {
			t.Fatalf("%s: the body was read before the token was checked", tc.name)
		}
	}
	if h.calls.Load() != 0 || server.LinkRefused() != 5 {
		t.Fatalf("handler ran %d times, refused %d", h.calls.Load(), server.LinkRefused())
	}
	resp, text, body := linkGet(t, c, url, LinkTokenHeader, "link-tok")
	if resp.StatusCode != http.StatusOK || text != "linked /link/v1/info" || !body.read.Load() {
		t.Fatalf("right token: %d %q read=%v", resp.StatusCode, text, body.read.Load())
	}
	// Read-only: a POST with the right token is still refused.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
	req.Header.Set(LinkTokenHeader, "link-tok")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST on the link: %d", resp.StatusCode)
	}
}

// The link token opens no raft or node route: not as the raft token, and
// not even on a node whose raft routes check nothing (no raft token).
func TestLinkTokenRefusedOnRaftRoutes(t *testing.T) {
	for _, raftToken := range []string{"raft-tok", ""} {
		_, addr := startLinkTransport(t, Config{Token: raftToken, LinkToken: "link-tok", Link: &linkHandler{}, Node: &linkHandler{}})
		sender, _ := startTransport(t, "link-tok", 0, &receiver{}, io.Discard)
		if _, err := sender.GetConnection(context.Background(), addr); !errors.Is(err, ErrRefused) {
			t.Fatalf("raft token %q: the link token opened a raft stream: %v", raftToken, err)
		}
		nc := NewNodeClient(nil, "link-tok", 10*time.Second, Timeouts{})
		resp, err := nc.Do(context.Background(), addr, http.MethodGet, "anything", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		nc.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("raft token %q: the link token on a node route: %d", raftToken, resp.StatusCode)
		}
		// A raw raft request carrying the link header is refused before
		// its body, like any other wrong credential.
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+streamPath, strings.NewReader("garbage"))
		req.Header.Set(TokenHeader, raftToken)
		req.Header.Set(GroupHeader, "0")
		req.Header.Set(LinkTokenHeader, "link-tok")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("raft token %q: a raft request with the link header: %d", raftToken, resp.StatusCode)
		}
	}
	// The raft token still opens the raft routes beside a link token.
	_, addr := startLinkTransport(t, Config{Token: "raft-tok", LinkToken: "link-tok", Link: &linkHandler{}})
	sender, _ := startTransport(t, "raft-tok", 0, &receiver{}, io.Discard)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// A node without a link token has no link route, whatever is presented.
func TestLinkRouteAbsentWithoutToken(t *testing.T) {
	h := &linkHandler{}
	_, addr := startLinkTransport(t, Config{Token: "raft-tok", Link: h})
	for _, tok := range []string{"", "raft-tok", "anything"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+LinkPrefix+"info", nil)
		req.Header.Set(LinkTokenHeader, tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("token %q: %d, want 404", tok, resp.StatusCode)
		}
	}
	if h.calls.Load() != 0 {
		t.Fatal("the link handler ran without a link token")
	}
}

// With TLS between nodes the link is served on the same TLS listener: a
// client with a certificate of the cluster's CA reads it, a plaintext one
// does not.
func TestLinkOverTLS(t *testing.T) {
	ca, err := nodetlstest.NewCA(t.TempDir(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	h := &linkHandler{}
	_, addr := startLinkTransport(t, Config{Token: "raft-tok", LinkToken: "link-tok", Link: h, TLS: tlsNode(t, ca, "source")})
	standby := tlsNode(t, ca, "standby")
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: standby.Client()}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+LinkPrefix+"entries", nil)
	req.Header.Set(LinkTokenHeader, "link-tok")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "linked /link/v1/entries" || resp.TLS == nil {
		t.Fatalf("over TLS: %d %q tls=%v", resp.StatusCode, b, resp.TLS != nil)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://"+addr+LinkPrefix+"entries", nil)
	req.Header.Set(LinkTokenHeader, "link-tok")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext link request served by a TLS listener")
		}
	}
	if h.calls.Load() != 1 {
		t.Fatalf("handler ran %d times", h.calls.Load())
	}
}
