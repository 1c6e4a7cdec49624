package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A fetch answers at most maxFetchTotalBytes of records whatever its
// entries ask for: 1024 entries of 8 MiB each (the same partition may be
// named again) would otherwise build an 8 GiB answer in memory. The
// entries the cap cuts short answer no records, so their reader asks
// again from the same offset; the first record is always answered.
func TestFetchAnswerHasATotalSizeCap(t *testing.T) {
	n := startNode(t)
	payload := `"` + strings.Repeat("x", 64<<10) + `"`
	stored := 0
	for stored < maxFetchTotalBytes/2+(1<<20) {
		var items []map[string]any
		for i := 0; i < 12; i++ {
			items = append(items, map[string]any{"queue": "big", "partition": "p", "payload": json.RawMessage(payload)})
			stored += len(payload)
		}
		if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": items}, nil); code != http.StatusOK && code != http.StatusCreated {
			t.Fatalf("push: %d", code)
		}
	}
	var entries []map[string]any
	for i := 0; i < 3; i++ {
		entries = append(entries, map[string]any{"queue": "big", "partition": "p", "offset": 0, "maxBytes": maxFetchBytes})
	}
	var ans struct {
		Entries []struct {
			Records []struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"records"`
			HighWatermark uint64 `json:"highWatermark"`
			Error         string `json:"error"`
		} `json:"entries"`
	}
	if code := postJSON(t, n.url+"/api/v1/fetch", map[string]any{"entries": entries}, &ans); code != http.StatusOK || len(ans.Entries) != 3 {
		t.Fatalf("fetch: %d, %d entries", code, len(ans.Entries))
	}
	total, records := 0, 0
	for _, e := range ans.Entries {
		if e.Error != "" || e.HighWatermark == 0 {
			t.Fatalf("entry: %+v", e)
		}
		for _, r := range e.Records {
			total += len(r.Payload)
			records++
		}
	}
	if total > maxFetchTotalBytes {
		t.Fatalf("a fetch answered %d bytes of payload in %d records, over its total cap of %d", total, records, maxFetchTotalBytes)
	}
	if len(ans.Entries[0].Records) == 0 {
		t.Fatal("the first entry got no records")
	}
}
