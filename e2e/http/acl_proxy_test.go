package http

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestProxyACLsOnBothDoors: a node with the embedded proxy and QUEEN_ACLS
// on, two clusters (alpha, beta) whose admin keys are the super users,
// and alpha's produce-only key. alpha's admin key creates a binding over
// HTTP (/api/v1/system/acls through the proxy port); its Kafka login sees
// it with DescribeAcls; the binding is enforced on the produce key's HTTP
// pushes (User:apikey:<cluster>:<key>); the produce key may not create
// one (403 forbidden, the proxy's answer); beta's admin key sees none of
// alpha's bindings over either door.
func TestProxyACLsOnBothDoors(t *testing.T) {
	bootKey, _ := newAPIKey(t)
	const token = "cp-token-acl-proxy"
	c, base := proxyNode(t, bootKey, token, map[string]string{"QUEEN_KAFKA_SASL": "plain", "QUEEN_ACLS": "true"})
	ctx := e2etest.Deadline(t, 4*time.Minute)

	type provisioned struct {
		ClusterID string `json:"cluster_id"`
		KeyID     string `json:"key_id"`
	}
	admins, ids := map[string]string{}, map[string]provisioned{}
	for _, slug := range []string{"alpha", "beta"} {
		key, hash := newAPIKey(t)
		var out provisioned
		if code := cp(t, ctx, base, token, "POST", "/api/cp/provision",
			provisionBody(slug, uuid.NewString(), hash, "pro", "produce", "consume", "read", "admin"), &out); code != http.StatusOK {
			t.Fatalf("provision %s: %d", slug, code)
		}
		admins[slug], ids[slug] = key, out
	}
	producerKey, hash := newAPIKey(t)
	var minted struct {
		ID string `json:"id"`
	}
	body := fmt.Sprintf(`{"cluster_id":%q,"name":"orders-writer","key_hash":%q,"scopes":["produce"]}`, ids["alpha"].ClusterID, hash)
	if code := cp(t, ctx, base, token, "POST", "/api/cp/keys", body, &minted); code != http.StatusCreated {
		t.Fatalf("minting the produce key: %d", code)
	}
	principal := func(slug, keyID string) string { return "User:apikey:" + ids[slug].ClusterID + ":" + keyID }
	producer := principal("alpha", minted.ID)

	// The admin keys become the super users: their ids exist only now, so
	// the node restarts with them (QUEEN_ACL_SUPER_USERS is read at boot).
	n := c.Nodes[0]
	n.Stop()
	n.Env["QUEEN_ACL_SUPER_USERS"] = principal("alpha", ids["alpha"].KeyID) + ";" + principal("beta", ids["beta"].KeyID)
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	host := func(slug string) string { return slug + ".queen.example.com" }
	acls := func(slug, key, method, query, body string) (int, string) {
		var code int
		var out string
		// The proxy answers once the restarted node's state is readable.
		if err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
			code, _, out = proxyDo(t, ctx, base, proxyReq{method: method, path: "/api/v1/system/acls" + query, body: body,
				bearer: key, host: host(slug)})
			return code != http.StatusServiceUnavailable, nil
		}); err != nil {
			t.Fatalf("%s acls: %d %s", method, code, out)
		}
		return code, out
	}

	// alpha's admin key creates the binding over HTTP.
	grant := fmt.Sprintf(`{"acls":[{"resourceType":"TOPIC","resourceName":"orders","principal":%q,"operation":"WRITE","permission":"ALLOW"}]}`, producer)
	if code, out := acls("alpha", admins["alpha"], "POST", "", grant); code != http.StatusCreated {
		t.Fatalf("alpha's admin key creates a binding: %d %s", code, out)
	}
	want := []string{"TOPIC:LITERAL:orders:" + producer + ":*:WRITE:ALLOW"}

	// Its Kafka login sees it; beta's sees nothing.
	describe := func(slug string) []string {
		t.Helper()
		cl := e2etest.KgoClient(t, c, kgo.SASL(plain.Auth{User: slug, Pass: admins[slug]}.AsMechanism()))
		res, err := kadm.NewClient(cl).DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
			Operations().Allow().AllowHosts().Deny().DenyHosts())
		if err != nil {
			t.Fatalf("DescribeAcls as %s: %v", slug, err)
		}
		var out []string
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("DescribeAcls as %s: %v %s", slug, r.Err, r.ErrMessage)
			}
			for _, d := range r.Described {
				out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s:%s:%s", d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
			}
		}
		slices.Sort(out)
		return out
	}
	if got := describe("alpha"); !slices.Equal(got, want) {
		t.Fatalf("alpha's Kafka DescribeAcls: %q, want %q", got, want)
	}
	if got := describe("beta"); len(got) != 0 {
		t.Fatalf("beta's Kafka DescribeAcls: %q", got)
	}

	// Enforced on the produce key's pushes over HTTP.
	push := func(queue string) (int, string) {
		code, _, out := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", bearer: producerKey, host: host("alpha"),
			body: pushBody(queue, `"x"`)})
		return code, out
	}
	if code, out := push("orders"); code != http.StatusCreated {
		t.Fatalf("a push the binding allows: %d %s", code, out)
	}
	if code, out := push("payments"); code != http.StatusForbidden || !strings.Contains(out, `"code":"acl_denied"`) || !strings.Contains(out, producer) {
		t.Fatalf("a push no binding allows: %d %s", code, out)
	}

	// The produce key may not manage ACLs: the proxy's 403.
	deny := fmt.Sprintf(`{"acls":[{"resourceType":"TOPIC","resourceName":"payments","principal":%q,"operation":"WRITE","permission":"ALLOW"}]}`, producer)
	if code, out := acls("alpha", producerKey, "POST", "", deny); code != http.StatusForbidden ||
		out != `{"code":"forbidden","error":"operation not permitted for this credential"}` {
		t.Fatalf("the produce key creates a binding: %d %s", code, out)
	}

	// beta's admin key over HTTP: none of alpha's.
	code, out := acls("beta", admins["beta"], "GET", "", "")
	var listed struct {
		ACLs []json.RawMessage `json:"acls"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed.ACLs) != 0 {
		t.Fatalf("beta lists over HTTP: %d %s", code, out)
	}
	// And alpha's key is refused on beta's host, as on every route.
	if code, out := acls("beta", admins["alpha"], "GET", "", ""); code != http.StatusForbidden || out != keyMismatchBody {
		t.Fatalf("alpha's key on beta's host: %d %s", code, out)
	}
	// alpha lists it over HTTP too, once.
	if code, out := acls("alpha", admins["alpha"], "GET", "?resourceType=TOPIC", ""); code != http.StatusOK ||
		strings.Count(out, producer) != 1 {
		t.Fatalf("alpha lists over HTTP: %d %s", code, out)
	}
}
