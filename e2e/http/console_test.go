package http

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The proxy's console (/console on the proxy port) in a real headless
// Chromium: an API key is refused at sign-in, the bootstrap admin signs in
// with the password, creates a key on the page and reads it once; the key
// pushes through the proxy port and the queue appears in the console's
// list and on the dashboard behind the same sign-in, where a seek (a
// change) works too; the key revoked on the page is refused. Each page's
// screenshot goes to docs/ui/.
func TestConsoleInBrowser(t *testing.T) {
	needChromium(t)
	bootKey, _ := newAPIKey(t)
	_, proxy := proxyNode(t, bootKey, "cp-token-console", map[string]string{
		"QUEEN_PROXY_OPERATOR_ENABLED": "true", "QUEEN_PROXY_OPERATORS": "admin@localhost"})
	ctx := e2etest.Deadline(t, 40*time.Second)

	// Keys are refused on the console's API, in words.
	code, _, body := proxyDo(t, ctx, proxy, proxyReq{method: "GET", path: "/api/console/me", bearer: bootKey})
	if code != http.StatusUnauthorized || !strings.Contains(body, "API keys are not accepted on the console") {
		t.Fatalf("a key on the console: %d %s", code, body)
	}

	b := newBrowser(t, 35*time.Second)
	// The dashboard's page sends a signed-out browser to the sign-in.
	b.run(t, "open the dashboard signed out", chromedp.Navigate(proxy+"/"))
	b.waitFor(t, "the sign-in form", `location.pathname === "/console" && !!document.querySelector("form[aria-label='Sign in']")`, nil)
	b.everyFieldLabelled(t, "the sign-in page")
	email := chromedp.CSS(`form[aria-label='Sign in'] input[name=email]`)
	password := chromedp.CSS(`form[aria-label='Sign in'] input[name=password]`)
	b.run(t, "an API key as the password", chromedp.SendKeys(email, "admin@localhost"), chromedp.SendKeys(password, bootKey),
		chromedp.Click(chromedp.CSS(`form[aria-label='Sign in'] button[type=submit]`)))
	b.waitFor(t, "the key refused", `document.getElementById("signin-error").innerText.includes("API keys are not accepted")`, nil)
	b.screenshot(t, "console-signin")
	b.run(t, "a wrong password", chromedp.SetValue(password, "wrong"), chromedp.Click(chromedp.CSS(`form[aria-label='Sign in'] button[type=submit]`)))
	b.waitFor(t, "the password refused", `document.getElementById("signin-error").innerText === "Wrong email or password."`, nil)
	b.run(t, "sign in", chromedp.SetValue(password, "hunter22"), chromedp.Click(chromedp.CSS(`form[aria-label='Sign in'] button[type=submit]`)))
	b.waitFor(t, "the overview", `location.hash === "#/c/acme" && document.getElementById("tile-plan")?.innerText === "dev" &&
		document.getElementById("tile-role")?.innerText === "admin" && document.getElementById("who").innerText === "admin@localhost"`, nil)
	b.waitRow(t, "Queues", map[int]string{1: "50"})

	// A key made on the page, its plaintext shown once.
	b.run(t, "open keys", chromedp.Navigate(proxy+"/console#/c/acme/keys"))
	b.waitFor(t, "the create form", `!!document.querySelector("form[aria-label='Create an API key']")`, nil)
	b.everyFieldLabelled(t, "the keys page")
	b.run(t, "create a key", chromedp.SendKeys(chromedp.CSS(`form[aria-label='Create an API key'] input[name=name]`), "e2e-writer"),
		chromedp.Click(chromedp.CSS(`form[aria-label='Create an API key'] button[type=submit]`)))
	var key string
	b.waitFor(t, "the new key", `document.getElementById("new-key")?.innerText`, &key)
	if !regexp.MustCompile(`^qk_live_[A-Za-z0-9_-]{43}$`).MatchString(key) {
		t.Fatalf("the page shows %q as the new key", key)
	}
	b.waitRow(t, "e2e-writer", map[int]string{1: "consume, produce", 2: "active"})
	b.screenshot(t, "console-keys")

	// The key pushes through the proxy port; the queue shows in the
	// console's list and on the dashboard behind the same sign-in.
	code, _, body = proxyDo(t, ctx, proxy, proxyReq{method: "POST", path: "/api/v1/push", bearer: key, body: pushBody("console-orders", `{"n":1}`, `{"n":2}`)})
	if code != http.StatusCreated {
		t.Fatalf("push with the console's key: %d %s", code, body)
	}
	b.run(t, "open queues", chromedp.Navigate(proxy+"/console#/c/acme/queues"))
	b.waitRow(t, "console-orders", map[int]string{1: "1", 2: "2"})
	b.screenshot(t, "console-queues")
	b.run(t, "open the dashboard", chromedp.Navigate(proxy+"/#/queues"))
	b.waitRow(t, "console-orders", map[int]string{1: "1", 2: "2"})
	// A change from the dashboard rides the same sign-in: a group that
	// consumed one of the two messages is sought to the end on the page.
	consumeOne(t, ctx, proxy, bootKey, "console-orders", "console-workers")
	b.run(t, "open the group", chromedp.Navigate(proxy+"/#/groups/console-workers"))
	b.waitFor(t, "lag 1", `document.querySelector(".group-lag")?.dataset.lag === "1"`, nil)
	b.run(t, "seek to the end", chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.querySelector("form[aria-label='Seek console-workers on console-orders']");
		f.at.value = "2099-01-01T00:00";
		f.requestSubmit();
	})()`))
	b.waitFor(t, "lag 0 after the seek", `document.querySelector(".group-lag")?.dataset.lag === "0"`, nil)

	// Members and the operators' list (the admin is an operator here).
	b.run(t, "open members", chromedp.Navigate(proxy+"/console#/c/acme/members"))
	b.waitFor(t, "the admin", `document.querySelector("select[data-member='admin@localhost']")?.value === "admin"`, nil)
	b.everyFieldLabelled(t, "the members page")
	b.run(t, "add a member", chromedp.SendKeys(chromedp.CSS(`form[aria-label='Add a member'] input[name=email]`), "dev@acme.example"),
		chromedp.Click(chromedp.CSS(`form[aria-label='Add a member'] button[type=submit]`)))
	b.waitFor(t, "the new member", `document.querySelector("select[data-member='dev@acme.example']")?.value === "viewer"`, nil)
	setRole := func(email, role string) {
		b.run(t, "set "+email+"'s role", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const s = document.querySelector("select[data-member='%s']");
			s.value = %q;
			s.dispatchEvent(new Event("change"));
		})()`, email, role)))
	}
	setRole("dev@acme.example", "consumer")
	b.waitFor(t, "the new role", `document.querySelector("#view .notice.ok")?.innerText === "dev@acme.example is now consumer." &&
		document.querySelector("select[data-member='dev@acme.example']")?.value === "consumer"`, nil)
	setRole("admin@localhost", "viewer")
	b.waitFor(t, "the last admin kept", `document.querySelector("#view .notice.bad")?.innerText.includes("last admin") &&
		document.querySelector("select[data-member='admin@localhost']")?.value === "admin"`, nil)
	b.screenshot(t, "console-members")
	b.run(t, "remove the member", chromedp.Click(chromedp.CSS(`button[aria-label="Remove dev@acme.example from acme"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Confirm: remove dev@acme.example from acme"]`)))
	b.waitFor(t, "the member gone", `document.querySelector("#view .notice.ok")?.innerText === "dev@acme.example removed from acme." &&
		!document.querySelector("select[data-member='dev@acme.example']")`, nil)
	b.run(t, "open operator", chromedp.Click(chromedp.CSS(`a[href="#/operator"]`)))
	b.waitRow(t, "acme", map[int]string{2: "dev", 3: "active", 4: "active"})
	b.screenshot(t, "console-operator")

	// The overview after traffic, dark, then on a phone.
	b.run(t, "open the overview", chromedp.Navigate(proxy+"/console#/c/acme"))
	b.waitFor(t, "the month's pushes", `document.getElementById("tile-pushed")?.innerText === "2"`, nil)
	b.screenshot(t, "console-overview")
	b.run(t, "dark", chromedp.Click(chromedp.ID("theme-toggle")))
	b.waitFor(t, "the dark theme", `document.documentElement.dataset.theme === "dark"`, nil)
	b.screenshot(t, "console-overview-dark")
	b.run(t, "light", chromedp.Click(chromedp.ID("theme-toggle")))

	// Revoked on the page: the key is refused.
	b.run(t, "open keys again", chromedp.Navigate(proxy+"/console#/c/acme/keys"))
	revoke := chromedp.CSS(`button[aria-label="Revoke key e2e-writer"]`)
	b.run(t, "revoke", chromedp.Click(revoke))
	b.run(t, "confirm", chromedp.Click(chromedp.CSS(`button[aria-label="Confirm: revoke key e2e-writer for good"]`)))
	b.waitRow(t, "e2e-writer", map[int]string{2: "revoked"})
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		code, _, _ := proxyDo(t, ctx, proxy, proxyReq{method: "POST", path: "/api/v1/push", bearer: key, body: pushBody("console-orders", `{"n":3}`)})
		return code == http.StatusUnauthorized, nil
	}); err != nil {
		t.Fatalf("the revoked key still pushes: %v", err)
	}
	phone(t, b, "console-keys-phone")

	// A session that ends under an open page sends it back to the sign-in,
	// saying so.
	b.run(t, "end the session elsewhere", chromedp.Evaluate[chromedp.Void](`fetch("/auth/logout", {method: "POST", headers: {"X-Queen-Web": "1"}}).then(() => { location.hash = "#/c/acme/members"; })`))
	b.waitFor(t, "the sign-in after the session ended", `!!document.querySelector("form[aria-label='Sign in']") &&
		document.getElementById("alert").innerText === "Your session ended: sign in again."`, nil)
	b.run(t, "sign in again", chromedp.SendKeys(email, "admin@localhost"), chromedp.SendKeys(password, "hunter22"),
		chromedp.Click(chromedp.CSS(`form[aria-label='Sign in'] button[type=submit]`)))
	b.waitFor(t, "signed in again", `document.getElementById("who").innerText === "admin@localhost"`, nil)

	// Signed out: the dashboard's page sends the browser to sign in again.
	b.run(t, "sign out", chromedp.Click(chromedp.ID("sign-out")))
	b.waitFor(t, "the sign-in form again", `!!document.querySelector("form[aria-label='Sign in']")`, nil)
	b.run(t, "the dashboard signed out", chromedp.Navigate(proxy+"/"))
	b.waitFor(t, "back at the sign-in", `location.pathname === "/console" && !!document.querySelector("form[aria-label='Sign in']")`, nil)
	b.noErrors(t)
}

// phone takes a screenshot at a phone's width, then restores the laptop's.
func phone(t *testing.T, b *tab, name string) {
	t.Helper()
	b.run(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	b.waitFor(t, "the folded menu", `getComputedStyle(document.getElementById("menu-toggle")).display !== "none"`, nil)
	b.screenshot(t, name)
	b.run(t, "laptop", chromedp.EmulateReset())
}

// consumeOne pops one message of queue for group through the proxy with
// key and acknowledges it.
func consumeOne(t *testing.T, ctx context.Context, proxy, key, queue, group string) {
	t.Helper()
	code, _, body := proxyDo(t, ctx, proxy, proxyReq{method: "GET", bearer: key,
		path: "/api/v1/pop/queue/" + queue + "?batch=1&subscriptionMode=all&consumerGroup=" + group})
	var ans struct{ Messages []e2etest.PopMessage }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ans) != nil || len(ans.Messages) != 1 {
		t.Fatalf("pop through the proxy: %d %s", code, body)
	}
	m := ans.Messages[0]
	ack, _ := json.Marshal(map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
		"status": "completed", "consumerGroup": group})
	if code, _, body = proxyDo(t, ctx, proxy, proxyReq{method: "POST", path: "/api/v1/ack", bearer: key, body: string(ack)}); code != http.StatusOK {
		t.Fatalf("ack through the proxy: %d %s", code, body)
	}
}
