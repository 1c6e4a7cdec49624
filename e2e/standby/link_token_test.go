package standby

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
	"github.com/queen-mq/queen/raftgroups/link"
	"github.com/queen-mq/queen/wire"
)

// recordingBody records whether anyone read it.
type recordingBody struct {
	r    io.Reader
	read atomic.Bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

// TestLinkTokenOnTheRealBinary: the source's raft port serves the link
// only with QUEEN_LINK_TOKEN, refused before the body (a client that
// waits for 100-continue never sends it) when the token is wrong, absent
// or the raft token; the link token opens no raft route; and a KV write
// made over HTTP is read back through the link client as the command the
// state machine applied.
func TestLinkTokenOnTheRealBinary(t *testing.T) {
	ctx := e2etest.Deadline(t, 3*time.Minute)
	const raftTok, linkTok = "r4ft-e2e-token", "l1nk-e2e-token"
	src := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2,
		Env: map[string]string{"QUEEN_RAFT_TOKEN": raftTok, "QUEEN_LINK_TOKEN": linkTok}})
	n := src.Nodes[0]
	if !n.Grep("config: link") || n.Grep(linkTok) {
		t.Fatal("no boot line for the link, or the token in the log")
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 20 * time.Second}}
	do := func(method, url, header, token string) (int, bool) {
		t.Helper()
		body := &recordingBody{r: strings.NewReader("a body nobody may read")}
		req, err := http.NewRequestWithContext(ctx, method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = 22
		req.Header.Set("Expect", "100-continue")
		if header != "" {
			req.Header.Set(header, token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, body.read.Load()
	}
	info := "http://" + n.RaftAddr + "/link/v1/info"
	for _, c := range []struct{ header, token string }{
		{"", ""}, {link.TokenHeader, "wrong"}, {link.TokenHeader, raftTok}, {"X-Queen-Raft-Token", linkTok},
	} {
		if status, read := do(http.MethodGet, info, c.header, c.token); status != http.StatusUnauthorized || read {
			t.Fatalf("%s=%q: %d, body read %v", c.header, c.token, status, read)
		}
	}
	// The link token on a raft route (the clock one) is refused too.
	if status, read := do(http.MethodPost, "http://"+n.RaftAddr+"/raft/v1/time", "X-Queen-Raft-Token", linkTok); status != http.StatusUnauthorized || read {
		t.Fatalf("the link token on a raft route: %d, body read %v", status, read)
	}

	// Every refusal is counted, for an alert on a standby with the wrong
	// token (or someone probing the link).
	if v, err := e2etest.Metric(ctx, n.URL(), `queen_link_refused_total{group="0"}`); err != nil || v < 3 {
		t.Fatalf("queen_link_refused_total: %v %v, want at least 3", v, err)
	}

	e := e2etest.NewClient(t, ctx, n)
	if st := e.Do(http.MethodPut, "/api/v1/kv/linkns/linked-key", map[string]string{"v": "through-the-link"}, nil); st/100 != 2 {
		t.Fatalf("kv put: %d", st)
	}
	cl := link.NewClient([]string{n.RaftAddr}, linkTok, nil)
	defer cl.Close()
	found := false
	for g := 0; g < 2 && !found; g++ {
		inf, err := cl.Info(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		for from := inf.FirstIndex; from <= inf.CommitIndex && !found; {
			b, err := cl.Entries(ctx, g, from, 1<<20, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !b.Leader {
				t.Fatalf("group %d: the single source node's answer is not its leader's", g)
			}
			if len(b.Entries) == 0 {
				break
			}
			for _, en := range b.Entries {
				from = en.Index + 1
				if en.Skip {
					continue
				}
				pe, err := wire.ParseEntry(en.Payload)
				if err != nil {
					t.Fatalf("group %d entry %d: %v", g, en.Index, err)
				}
				for {
					cmd, ok := pe.Next()
					if !ok {
						break
					}
					if cmd.Kind != wire.KindKV {
						continue
					}
					kc, err := wire.DecodeKVCmd(cmd.Body)
					if err == nil && len(kc.Ops) == 1 && string(kc.Ops[0].Key) == "linked-key" {
						var v map[string]string
						if json.Unmarshal(kc.Ops[0].Value, &v) != nil || v["v"] != "through-the-link" || en.StampMs == 0 {
							t.Fatalf("the command read back: %+v stamp %d", kc.Ops[0], en.StampMs)
						}
						found = true
					}
				}
			}
		}
	}
	if !found {
		t.Fatal("the KV write was not read back through the link")
	}
}
