package api

import (
	"fmt"
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

// What the dashboard reads besides the listings: the data dir's disk use
// in /metrics, and the overview's total lag, which is the per-queue lags
// of /api/v1/analytics/queue-lag added up.
func TestMetricsDiskAndOverviewTotalLag(t *testing.T) {
	n := startNode(t)
	var items []map[string]any
	for i := range 6 {
		items = append(items, map[string]any{"queue": fmt.Sprintf("q%d", i%2), "partition": "p", "payload": i})
	}
	if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": items}, nil); code != http.StatusCreated {
		t.Fatalf("push: %d", code)
	}
	var m struct {
		Disk struct{ DataDirBytes, FilesystemBytes, AvailableBytes uint64 }
	}
	if code := getJSON(t, n.url+"/metrics", &m); code != 200 || m.Disk.FilesystemBytes == 0 || m.Disk.AvailableBytes > m.Disk.FilesystemBytes {
		t.Fatalf("metrics disk: %d %+v", code, m.Disk)
	}
	var ov struct {
		Lag struct{ Offset struct{ Total uint64 } }
	}
	var ql struct {
		Queues []struct{ LagMessages uint64 }
	}
	if getJSON(t, n.url+"/api/v1/resources/overview", &ov) != 200 || getJSON(t, n.url+"/api/v1/analytics/queue-lag", &ql) != 200 {
		t.Fatal("overview or queue-lag failed")
	}
	var sum uint64
	for _, q := range ql.Queues {
		sum += q.LagMessages
	}
	if len(ql.Queues) != 2 || ov.Lag.Offset.Total != sum || sum == 0 {
		t.Fatalf("overview total lag %d, queue lags %+v", ov.Lag.Offset.Total, ql.Queues)
	}
}
