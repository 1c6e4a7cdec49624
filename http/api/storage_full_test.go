package api

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups"
)

// Above QUEEN_RAFT_DISK_HIGH_PCT a push is 507 storage_full and changes
// nothing, while pops keep working and /health stays 200 with storageFull;
// data is accepted again only below the low mark (spec §2.1).
func TestStorageFullRefusesNewDataWithHysteresis(t *testing.T) {
	var used atomic.Uint64 // percent, as float64 bits
	setUsed := func(pct float64) { used.Store(math.Float64bits(pct)) }
	setUsed(10)
	n := startNodeWith(t, func(c *raftgroups.Config) {
		c.DiskHighPct, c.DiskLowPct = 85, 80
		c.DiskUsage = func(string) (float64, error) { return math.Float64frombits(used.Load()), nil }
	})
	push := func() (int, string) {
		resp, err := http.Post(n.url+"/api/v1/push", "application/json",
			strings.NewReader(`{"items":[{"queue":"full","partition":"p","payload":{"n":1}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Code
	}
	if st, _ := push(); st != http.StatusCreated {
		t.Fatalf("push on an empty disk: %d", st)
	}
	health := func() (int, bool) {
		var h struct{ StorageFull bool }
		return getJSON(t, n.url+"/health", &h), h.StorageFull
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	setUsed(90)
	waitFor("storageFull in /health", func() bool { _, full := health(); return full })
	if st, code := push(); st != http.StatusInsufficientStorage || code != "storage_full" {
		t.Fatalf("push above the high mark: %d %q", st, code)
	}
	if st, _ := health(); st != http.StatusOK {
		t.Fatalf("a full node is still healthy, got %d", st)
	}
	resp, err := http.Get(n.url + "/metrics/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	prom, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"queen_storage_full 1\n", `queen_storage_segment_files{group="0"} `, `queen_storage_segment_bytes{group="0"} `} {
		if !strings.Contains(string(prom), want) {
			t.Fatalf("/metrics/prometheus lacks %q", want)
		}
	}
	var popped struct {
		Messages []struct {
			Data map[string]int `json:"data"`
		}
	}
	if st := getJSON(t, n.url+"/api/v1/pop/queue/full?batch=10", &popped); st != http.StatusOK || len(popped.Messages) != 1 {
		t.Fatalf("pop while full: %d %+v (the refused push must have stored nothing)", st, popped)
	}

	setUsed(79) // the hysteresis itself is raftgroups' unit test

	waitFor("storageFull cleared", func() bool { _, full := health(); return !full })
	if st, _ := push(); st != http.StatusCreated {
		t.Fatalf("push below the low mark: %d", st)
	}
}
