package http

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestQueenSDKCompatibility drives the answers Queen's SDKs and queenctl
// rely on: an empty push batch, a large messages limit, a configure
// without a queue, the default subscription mode, and the routes Queen
// serves over its buffers, shared state and database statistics.
func TestQueenSDKCompatibility(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	base := c.Nodes[0].URL()
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])

	// An empty batch is 201 [] (the SDKs flush empty buffers).
	status, _, body := e2etest.RawRequest(t, ctx, http.MethodPost, base+"/api/v1/push", `{"items":[]}`)
	if status != http.StatusCreated || string(body) != "[]" {
		t.Fatalf("empty push: %d %s, want 201 []", status, body)
	}

	// A configure without a queue is Queen's 400 "queue is required".
	status, _, body = e2etest.RawRequest(t, ctx, http.MethodPost, base+"/api/v1/configure", `{"queue":""}`)
	var e e2etest.ErrorAnswer
	if err := json.Unmarshal(body, &e); err != nil || status != http.StatusBadRequest || e.Code != "bad_request" || e.Error != "queue is required" {
		t.Fatalf(`configure {"queue":""}: %d %s`, status, body)
	}

	// The default subscription is all: a new group reads from the start.
	cl.Push(e2etest.PushItems("sdkq", "p", 1, 2, 3)...)
	cl.MustPop(e2etest.PopPath("sdkq", "batch=10", "consumerGroup=fresh"), 3)
	cl.PopEmpty(e2etest.PopPath("sdkq", "batch=10", "consumerGroup=newonly", "subscriptionMode=new"))

	// limit=10000 is accepted and clamped to 1000.
	var msgs struct {
		Messages   []map[string]any `json:"messages"`
		Pagination struct {
			Limit int `json:"limit"`
		} `json:"pagination"`
	}
	if code := cl.Do(http.MethodGet, "/api/v1/messages?limit=10000&queue=sdkq", nil, &msgs); code != http.StatusOK || msgs.Pagination.Limit != 1000 || len(msgs.Messages) != 3 {
		t.Fatalf("messages?limit=10000: %d %+v", code, msgs)
	}
	if code := cl.Do(http.MethodGet, "/api/v1/messages?limit=-1", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("messages?limit=-1: %d, want 400", code)
	}

	// A queue's messages, as the dashboard of Queen lists them.
	msgs.Messages = nil
	if code := cl.Do(http.MethodGet, "/api/v1/status/queues/sdkq/messages", nil, &msgs); code != http.StatusOK || len(msgs.Messages) != 3 || msgs.Pagination.Limit != 50 {
		t.Fatalf("status/queues/sdkq/messages: %d %+v", code, msgs)
	}

	// Buffers: the maintenance hold; the database is raft.
	var buf map[string]any
	if code := cl.Do(http.MethodGet, "/api/v1/status/buffers", nil, &buf); code != http.StatusOK ||
		buf["pending"] != float64(0) || buf["failed"] != float64(0) || buf["dbHealthy"] != true {
		t.Fatalf("status/buffers: %d %v", code, buf)
	}

	// Shared state: the raft groups every node applies.
	var shared struct {
		Enabled   bool             `json:"enabled"`
		Mechanism string           `json:"mechanism"`
		Groups    []map[string]any `json:"groups"`
	}
	if code := cl.Do(http.MethodGet, "/api/v1/system/shared-state", nil, &shared); code != http.StatusOK ||
		!shared.Enabled || shared.Mechanism != "raft" || len(shared.Groups) == 0 {
		t.Fatalf("system/shared-state: %d %+v", code, shared)
	}

	// queenctl analytics postgres: the storage engine's figures.
	var pg struct {
		Engine   string           `json:"engine"`
		Postgres bool             `json:"postgres"`
		Groups   []map[string]any `json:"groups"`
		Database map[string]any   `json:"database"`
	}
	if code := cl.Do(http.MethodGet, "/api/v1/analytics/postgres-stats", nil, &pg); code != http.StatusOK ||
		pg.Engine != "raft+pebble" || pg.Postgres || len(pg.Groups) == 0 || pg.Database["sizeBytes"] == nil {
		t.Fatalf("analytics/postgres-stats: %d %+v", code, pg)
	}
}

// TestMaxWaitEvictsUnreadMessages: maxWaitTimeSeconds deletes messages
// nobody consumed in time, in a partition no group has read as well, as
// Queen evicts them; what is younger stays.
func TestMaxWaitEvictsUnreadMessages(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])
	cl.Configure(map[string]any{"queue": "evict", "options": map[string]any{"maxWaitTimeSeconds": 2}})
	cl.Push(e2etest.PushItems("evict", "nobody", "old-1", "old-2")...)
	cl.Eventually(30*time.Second, "the unread messages to be evicted", func() bool {
		_, hwm, start := cl.Log("evict", "nobody")
		return start == 2 && hwm == 2
	})
	// A group subscribing now finds nothing of them, nor in the DLQ (no
	// group was owed them).
	cl.PopEmpty(e2etest.PopPath("evict", "batch=10", "consumerGroup=late"))
	var dlq struct {
		Messages []map[string]any `json:"messages"`
	}
	if code := cl.Do(http.MethodGet, "/api/v1/dlq?queue=evict", nil, &dlq); code != http.StatusOK || len(dlq.Messages) != 0 {
		t.Fatalf("dlq: %d %+v", code, dlq)
	}
}
