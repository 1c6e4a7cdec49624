package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

func consoleGet(p *Proxy, path, token string) (int, string) {
	var req fasthttp.Request
	req.SetRequestURI(path)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	p.serve(&rc)
	return rc.Response.StatusCode(), string(rc.Response.Body())
}

func TestConsoleAPI(t *testing.T) {
	key, _ := NewKey("live")
	p, _ := testProxy(t, Config{JWTSecret: "s", Bootstrap: Bootstrap{Tenant: "acme", APIKey: key, Password: "pw"}})
	p.broker = api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	ctx := context.Background()
	if err := p.seed(ctx); err != nil {
		t.Fatal(err)
	}
	body := `{"email":"admin@localhost","password":"pw"}`
	code, out := call(p, "POST", "/auth/login", "", strings.NewReader(body), len(body))
	var login struct {
		Token string `json:"token"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(out), &login) != nil {
		t.Fatalf("login: %d %s", code, out)
	}
	code, out = consoleGet(p, "/api/console/clusters/acme", login.Token)
	if code != http.StatusOK || !strings.Contains(out, `"plan_code":"dev"`) || !strings.Contains(out, `"month_to_date"`) ||
		!strings.Contains(out, `"max_queues":50`) {
		t.Fatalf("overview: %d %s", code, out)
	}
	code, out = consoleGet(p, "/api/console/clusters/acme/keys", login.Token)
	if code != http.StatusOK || !strings.Contains(out, `"name":"bootstrap"`) || strings.Contains(out, HashKey(key)) {
		t.Fatalf("keys: %d %s", code, out)
	}
	if code, out = consoleGet(p, "/api/console/clusters/acme/members", login.Token); code != http.StatusOK || !strings.Contains(out, "admin@localhost") {
		t.Fatalf("members: %d %s", code, out)
	}
	if code, out = consoleGet(p, "/api/console/clusters/acme/queues", login.Token); code != http.StatusOK || !strings.Contains(out, `"queues"`) {
		t.Fatalf("queues: %d %s", code, out)
	}
	if code, _ = consoleGet(p, "/api/console/clusters/other", login.Token); code != http.StatusForbidden {
		t.Fatalf("a cluster without a role: %d", code)
	}
	if code, _ = consoleGet(p, "/api/console/clusters/acme", key); code != http.StatusUnauthorized {
		t.Fatalf("an API key on the console: %d", code)
	}
	// A viewer sees the cluster, not its members.
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	viewer, _, _ := p.store.ensureUser(ctx, "", "viewer@acme.example", tn, c.ID, RoleViewer, "")
	vt, _ := p.issueSession(viewer, time.Now())
	if code, _ = consoleGet(p, "/api/console/clusters/acme", vt); code != http.StatusOK {
		t.Fatalf("a viewer's overview: %d", code)
	}
	if code, _ = consoleGet(p, "/api/console/clusters/acme/members", vt); code != http.StatusForbidden {
		t.Fatalf("a viewer's members: %d", code)
	}
}
