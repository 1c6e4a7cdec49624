package kafka

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestACLsThroughKafkaPython: kafka-python's KafkaAdminClient creates,
// describes and deletes ACLs as the super user (its JWT as the PLAIN
// password); the HTTP
// admin route sees what it created and what it deleted: one model, both
// doors. The script: e2e/clients/kafka-python/acls.py.
func TestACLsThroughKafkaPython(t *testing.T) {
	python := ""
	for _, candidate := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(candidate); err == nil && exec.Command(path, "-c", "import kafka.admin").Run() == nil {
			python = path
			break
		}
	}
	if python == "" {
		t.Skip("kafka-python is not installed (.ci/run installs python3-kafka)")
	}
	env := aclEnv()
	env["QUEEN_KAFKA_SASL"] = "plain"
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: env})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	base, root := c.Nodes[0].URL(), jwtOf(t, "root", "admin")
	// One binding made over HTTP, which the script must see over Kafka.
	createACLs(ctx, t, base, root, aclBinding("group", "py-", "prefixed", "User:py", "read", "allow"))

	run := func(phase string) []map[string]string {
		t.Helper()
		cmd := exec.CommandContext(ctx, python, "acls.py", c.Nodes[0].KafkaAddr, root, phase)
		cmd.Dir = filepath.Join("..", "clients", "kafka-python")
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("acls.py %s: %v\n%s", phase, err, ee.Stderr)
			}
			t.Fatalf("acls.py %s: %v", phase, err)
		}
		var rows []map[string]string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line == "" {
				continue
			}
			var r map[string]string
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("acls.py %s printed %q: %v", phase, line, err)
			}
			rows = append(rows, r)
		}
		return rows
	}
	httpACLs := func() []map[string]string {
		t.Helper()
		code, body := httpAs(ctx, t, "GET", base+"/api/v1/system/acls?principal="+url.QueryEscape("User:py"), root, "")
		var out struct{ ACLs []map[string]string }
		if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("GET acls: %d %s", code, body)
		}
		return out.ACLs
	}

	if rows := run("create"); len(rows) != 1 || rows[0]["succeeded"] != "3" || rows[0]["failed"] != "0" {
		t.Fatalf("create: %v", rows)
	}
	if got := httpACLs(); len(got) != 4 {
		t.Fatalf("HTTP sees %d bindings of User:py after kafka-python created 3: %v", len(got), got)
	}
	described := run("describe")
	want := map[string]bool{"TOPIC py. PREFIXED READ ALLOW": false, "TOPIC py.orders LITERAL WRITE ALLOW": false,
		"GROUP py-g LITERAL READ DENY": false, "GROUP py- PREFIXED READ ALLOW": false}
	for _, r := range described {
		key := strings.Join([]string{r["resourceType"], r["name"], r["pattern"], r["operation"], r["permission"]}, " ")
		if _, ok := want[key]; !ok {
			t.Fatalf("kafka-python described %q, not one of %v", key, want)
		}
		want[key] = true
	}
	for k, seen := range want {
		if !seen {
			t.Fatalf("kafka-python did not describe %s (got %v)", k, described)
		}
	}
	// Delete every TOPIC binding of User:py: two go, the groups stay.
	if rows := run("delete"); len(rows) != 2 {
		t.Fatalf("delete answered %v, want the 2 topic bindings", rows)
	}
	got := httpACLs()
	if len(got) != 2 || got[0]["resourceType"] != "GROUP" || got[1]["resourceType"] != "GROUP" {
		t.Fatalf("HTTP after kafka-python deleted the topic bindings: %v", got)
	}
}
