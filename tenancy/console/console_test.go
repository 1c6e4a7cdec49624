package console

import (
	"strings"
	"testing"

	"github.com/queen-mq/queen/http/ui"
)

func TestLookup(t *testing.T) {
	if p := Page(); !strings.Contains(string(p.Body), `src="/console/assets/app.js"`) || !strings.HasPrefix(p.ContentType, "text/html") {
		t.Fatalf("the page: %q %.200s", p.ContentType, p.Body)
	}
	for _, name := range []string{"app.js", "pages.js", "console.css", "style.css", "api.js", "dom.js", "chart.js", "shell.js"} {
		a, ok := Lookup(name)
		if !ok || len(a.Body) == 0 || a.ETag == "" {
			t.Fatalf("%s: not served", name)
		}
	}
	if a, _ := Lookup("app.js"); !strings.Contains(string(a.Body), "/api/console/") {
		t.Fatal("app.js is the dashboard's, not the console's")
	}
	// The dashboard's pages, the page itself and escapes are not assets.
	for _, name := range []string{"", "index.html", "pages/queues.js", "../ui.go", "/etc/passwd", "nope.js"} {
		if _, ok := Lookup(name); ok {
			t.Fatalf("%q is served", name)
		}
	}
}

// Every module import and /console/assets/ link of the console's files
// resolves, the shared modules' imports included.
func TestEveryReferenceResolves(t *testing.T) {
	if bad := ui.Unresolved(assets, "/console/assets/", Lookup); len(bad) > 0 {
		t.Fatalf("not served: %q", bad)
	}
	sharedFiles := map[string]ui.Asset{}
	for _, name := range shared {
		sharedFiles[name], _ = Lookup(name)
	}
	if bad := ui.Unresolved(sharedFiles, "/console/assets/", Lookup); len(bad) > 0 {
		t.Fatalf("a shared module imports what the console does not serve: %q", bad)
	}
}
