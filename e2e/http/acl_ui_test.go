package http

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestACLPageInBrowser: the dashboard's ACLs page (http/ui/static/pages/
// acls.js), reached from the nav, lists the bindings made over HTTP, and
// its filter narrows them as the route does; on a node with ACLs off it
// says they are off instead of showing an error. No JWT here: the
// anonymous principal is the super user.
func TestACLPageInBrowser(t *testing.T) {
	needChromium(t)
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_ACLS": "true", "QUEEN_ACL_SUPER_USERS": "User:ANONYMOUS"}})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, 90*time.Second)
	e2etest.GetJSON(t, ctx, "POST", base+"/api/v1/system/acls", map[string]any{"acls": []map[string]string{
		{"resourceType": "topic", "resourceName": "orders.", "patternType": "prefixed", "principal": "User:alice", "operation": "write", "permission": "allow"},
		{"resourceType": "topic", "resourceName": "orders.secret", "principal": "User:alice", "operation": "all", "permission": "deny"},
		{"resourceType": "group", "resourceName": "billing", "principal": "User:bob", "operation": "read", "permission": "allow"},
	}}, http.StatusCreated, nil)

	b := newBrowser(t, 75*time.Second)
	b.run(t, "open the dashboard", chromedp.Navigate(base+"/#/overview"))
	b.run(t, "nav to ACLs", chromedp.Click(chromedp.CSS(`nav a[data-page="acls"]`)))
	b.waitRow(t, "User:alice", map[int]string{1: "DENY", 2: "ALL", 3: "TOPIC", 4: "LITERAL", 5: "orders.secret"})
	b.waitRow(t, "User:alice", map[int]string{1: "ALLOW", 2: "WRITE", 4: "PREFIXED", 5: "orders."})
	b.waitRow(t, "User:bob", map[int]string{3: "GROUP", 5: "billing"})
	b.everyFieldLabelled(t, "ACLs")
	// What applies to orders.x: the prefix, not the literal orders.secret.
	b.run(t, "filter", chromedp.SetValue(`#view input[name="resourceName"]`, "orders.x"),
		chromedp.Click(chromedp.CSS(`#view input[name="match"]`)),
		chromedp.Click(chromedp.CSS(`#view form button[type="submit"]`)))
	b.waitFor(t, "only the prefix", `[...document.querySelectorAll("#view tbody tr")].map((r) => r.cells[5].innerText.trim()).join() === "orders."`, nil)
	b.screenshot(t, "acls")
	b.noErrors(t)

	off := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	b.run(t, "open ACLs with ACLs off", chromedp.Navigate(off.Nodes[0].URL()+"/#/acls"))
	b.waitFor(t, "the off notice", `document.querySelector("#view .notice")?.innerText.includes("ACLs are off")`, nil)
}
