package http

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queen-mq/queen/e2e/browser"
)

// A real headless Chromium for the dashboard tests (e2e/browser).

// needChromium skips the test when no Chromium is installed, as the tests
// of other missing clients skip, unless QUEEN_E2E_REQUIRE_CHROMIUM is set
// (.ci/run sets it after installing Chromium): there a missing browser is
// a failure, not a silent skip.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := browser.Path(); err != nil {
		if os.Getenv("QUEEN_E2E_REQUIRE_CHROMIUM") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// tab is one headless Chromium tab; it records the page's uncaught
// exceptions and console errors so a test can insist there were none.
type tab struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium with a laptop-sized window; it is stopped
// when the test ends, within timeout at the latest.
func newBrowser(t *testing.T, timeout time.Duration) *tab {
	t.Helper()
	bctx, stop, err := browser.Start(1280, 860)
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTime := context.WithTimeout(bctx, timeout)
	b := &tab{ctx: ctx}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			// Network refusals the page expects (a 401 before sign-in)
			// come as browser log entries; only the page's own errors
			// count.
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source == "") {
				b.record(m.String())
			}
		}
	}()
	t.Cleanup(func() { cancelTime(); stop(); <-done })
	return b
}

func (b *tab) record(s string) {
	b.mu.Lock()
	b.errors = append(b.errors, s)
	b.mu.Unlock()
}

// noErrors fails the test if the page threw or logged an error.
func (b *tab) noErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Fatalf("the page reported errors:\n%s", strings.Join(b.errors, "\n"))
	}
}

func (b *tab) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls a JavaScript expression until it is truthy (or the
// deadline passes) and decodes its value into out.
func (b *tab) waitFor(t *testing.T, what, expr string, out any) {
	t.Helper()
	// A predicate that throws because the page is mid-render (a row
	// without its cells yet) has not held yet: Poll would end at the
	// first exception, so it is caught and polled again.
	guarded := "(() => { try { return (" + expr + "); } catch (e) { return false; } })()"
	raw, err := chromedp.Run(b.ctx, chromedp.Poll[[]byte](guarded, chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		view, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("view").innerText.slice(0, 1500) + "\n[alert] " + document.getElementById("alert").innerText`))
		t.Fatalf("waiting for %s: %v\npage shows:\n%s", what, err, view)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v (%s)", what, err, raw)
		}
	}
}

// waitRow waits until the page's table has a row whose first cell is
// first and whose cells at the given columns read as want, and returns
// the row's cells.
func (b *tab) waitRow(t *testing.T, first string, want map[int]string) []string {
	t.Helper()
	checks := []string{}
	for col, v := range want {
		checks = append(checks, fmt.Sprintf("c[%d] === %q", col, v))
	}
	cond := "true"
	if len(checks) > 0 {
		cond = strings.Join(checks, " && ")
	}
	expr := fmt.Sprintf(`(() => {
		for (const r of document.querySelectorAll("#view tbody tr")) {
			const c = [...r.cells].map((x) => x.innerText.trim());
			if (c[0] === %q && %s) return c;
		}
		return null;
	})()`, first, cond)
	var row []string
	b.waitFor(t, fmt.Sprintf("a row %q with %v", first, want), expr, &row)
	return row
}

// screenshot captures the viewport as name.png: into docs/ui (the
// pictures docs/ui.md shows) when QUEEN_E2E_SCREENSHOTS is set, into a
// temporary directory otherwise, so a test run leaves the checkout as it
// was.
func (b *tab) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := t.TempDir()
	if os.Getenv("QUEEN_E2E_SCREENSHOTS") != "" {
		dir = filepath.Join("..", "..", "docs", "ui")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// everyFieldLabelled fails the test if a form field or button on the page
// has no accessible name (a label, aria-label or text).
func (b *tab) everyFieldLabelled(t *testing.T, where string) {
	t.Helper()
	unnamed, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("input, select, textarea, button")]
		.filter((e) => !(e.labels?.length || e.getAttribute("aria-label") || e.innerText.trim()))
		.map((e) => e.outerHTML.slice(0, 120))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(unnamed) > 0 {
		t.Fatalf("%s: controls without a name: %q", where, unnamed)
	}
}
