package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The dashboard is served from the binary: the page, its modules with a
// JavaScript type, revalidation by ETag, and 404 for anything else.
func TestDashboardServesPageAndAssets(t *testing.T) {
	n := startNode(t)
	get := func(path, etag string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, n.url+path, nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `src="/assets/app.js"`) {
		t.Fatalf("GET /: %d %s %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, _ = get("/assets/pages/queues.js", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || resp.Header.Get("ETag") == "" {
		t.Fatalf("module: %d %v", resp.StatusCode, resp.Header)
	}
	if again, _ := get("/assets/pages/queues.js", resp.Header.Get("ETag")); again.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: %d", again.StatusCode)
	}
	for _, p := range []string{"/assets/nope.js", "/assets/../ui.go", "/assets/", "/index.html"} {
		if resp, _ := get(p, ""); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
	}
}
