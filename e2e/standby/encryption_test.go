package standby

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// TestStandbyKeepsPayloadsSealed: an encrypted queue's messages cross the
// link and rest on a standby sealed. A standby with the source's
// QUEEN_ENCRYPTION_KEY serves them after promotion; one without it
// follows to lag 0 all the same, holds no plaintext, and after promotion
// serves the sealed envelope (what any node without the key does,
// docs/security.md).
func TestStandbyKeepsPayloadsSealed(t *testing.T) {
	ctx := e2etest.Deadline(t, 4*time.Minute)
	kb := make([]byte, 32)
	_, _ = rand.Read(kb)
	key := hex.EncodeToString(kb)
	mark := "STANDBY-SEALED-" + hex.EncodeToString(kb[:6])
	clear := "STANDBY-CLEAR-" + hex.EncodeToString(kb[6:12])
	src := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2,
		Env: map[string]string{"QUEEN_LINK_TOKEN": linkToken, "QUEEN_ENCRYPTION_KEY": key}})
	sn := src.Nodes[0]
	if code, err := e2etest.Call(ctx, http.MethodPost, sn.URL()+"/api/v1/configure",
		map[string]any{"queue": "vault", "options": map[string]any{"encryptionEnabled": true}}, nil); err != nil || code != 200 {
		t.Fatalf("configure: %d %v", code, err)
	}
	if code, err := e2etest.Call(ctx, http.MethodPost, sn.URL()+"/api/v1/push", map[string]any{"items": []map[string]any{
		{"queue": "vault", "payload": map[string]any{"card": mark}},
		{"queue": "clear", "payload": map[string]any{"note": clear}}}}, nil); err != nil || code != 201 {
		t.Fatalf("push: %d %v", code, err)
	}
	env := map[string]string{"QUEEN_STANDBY_OF": sn.RaftAddr, "QUEEN_LINK_TOKEN": linkToken}
	withKey := map[string]string{"QUEEN_ENCRYPTION_KEY": key}
	for k, v := range env {
		withKey[k] = v
	}
	keyed := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2, Env: withKey}).Nodes[0]
	keyless := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2, Env: env}).Nodes[0]
	for _, n := range []*harness.Node{keyed, keyless} {
		if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
			h, err := health(ctx, n)
			if err != nil {
				return false, nil
			}
			applied := uint64(0)
			for _, g := range h.Groups {
				applied += g.Applied
			}
			return h.Following && h.LagEntries == 0 && applied > 0, nil
		}); err != nil {
			t.Fatalf("the standby did not catch up: %v", err)
		}
	}
	pop := func(n *harness.Node) string {
		t.Helper()
		var out struct {
			Messages []struct {
				Data json.RawMessage `json:"data"`
			} `json:"messages"`
		}
		if code, err := e2etest.Call(ctx, http.MethodPost, n.URL()+"/api/v1/system/standby/promote", nil, nil); err != nil || code != 200 {
			t.Fatalf("promote: %d %v", code, err)
		}
		if code, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/api/v1/pop/queue/vault?batch=10", nil, &out); err != nil || code != 200 || len(out.Messages) != 1 {
			t.Fatalf("pop: %d %v %+v", code, err, out)
		}
		return string(out.Messages[0].Data)
	}
	if d := pop(keyed); !strings.Contains(d, mark) {
		t.Fatalf("the keyed standby served %s", d)
	}
	if d := pop(keyless); strings.Contains(d, mark) || !strings.Contains(d, "encrypted") {
		t.Fatalf("the keyless standby served %s, want the sealed envelope", d)
	}
	// Both served the message, so it is in their stores: sealed. The
	// clear queue's message is found by the same scan, which so proves it
	// sees what is on disk.
	for _, n := range []*harness.Node{keyed, keyless} {
		if hits := raftgroupstest.FilesContaining(t, n.Dir, []byte(mark)); len(hits) != 0 {
			t.Fatalf("plaintext on a standby: %v", hits)
		}
		if hits := raftgroupstest.FilesContaining(t, n.Dir, []byte(clear)); len(hits) == 0 {
			t.Fatal("the scan does not see the clear queue's message on a standby")
		}
	}
}
