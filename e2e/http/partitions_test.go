package http

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// An auto-ack pop honours partitions like a leased one: over a queue of
// one-message partitions, partitions=8 answers 8 messages from 8 distinct
// partitions, and the group's next pops go on with the rest.
func TestAutoAckPopHonoursPartitions(t *testing.T) {
	base, ctx := startOne(t)
	items := make([]e2etest.PushItem, 20)
	for i := range items {
		items[i] = e2etest.PushItem{Queue: "sparse", Partition: fmt.Sprintf("customer-%02d", i), Payload: map[string]int{"n": i}}
	}
	if _, code, err := e2etest.Push(ctx, base, items); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, err)
	}
	for _, flag := range []string{"autoAck", "commitOnDelivery"} {
		group := "g-" + flag
		seen := map[string]bool{}
		ans, code, err := e2etest.Pop(ctx, base, e2etest.PopPath("sparse", "batch=100", "partitions=8", flag+"=true",
			"subscriptionMode=all", "consumerGroup="+group))
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s pop: %d %v", flag, code, err)
		}
		for _, m := range ans.Messages {
			if m.LeaseID != "" {
				t.Fatalf("%s pop left a lease: %+v", flag, m)
			}
			seen[m.Partition] = true
		}
		if len(ans.Messages) != 8 || len(seen) != 8 {
			t.Fatalf("%s pop with partitions=8: %d messages from %d partitions, want 8 from 8", flag, len(ans.Messages), len(seen))
		}
		// The rest, once each: nothing delivered above comes again.
		ans, code, err = e2etest.Pop(ctx, base, e2etest.PopPath("sparse", "batch=100", "partitions=64", flag+"=true",
			"subscriptionMode=all", "consumerGroup="+group))
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s second pop: %d %v", flag, code, err)
		}
		for _, m := range ans.Messages {
			if seen[m.Partition] {
				t.Fatalf("%s: partition %s delivered twice", flag, m.Partition)
			}
			seen[m.Partition] = true
		}
		if len(seen) != 20 {
			t.Fatalf("%s: %d of 20 partitions delivered after two pops", flag, len(seen))
		}
	}
}

// pageAll reads path page by page with limit, following the next cursor
// (the nextCursor field where the answer has one, which must agree with
// the header) until there is none; each page's body goes to collect. It
// answers how many pages there were.
func pageAll(t *testing.T, ctx context.Context, base, path string, limit int, collect func(body []byte)) int {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	cursor := ""
	for pages := 1; pages <= 1000; pages++ {
		u := fmt.Sprintf("%s%s%slimit=%d", base, path, sep, limit)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		status, hdr, body := e2etest.RawRequest(t, ctx, http.MethodGet, u, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", u, status, body)
		}
		collect(body)
		cursor = hdr.Get("Queen-Next-Cursor")
		var fields map[string]json.RawMessage
		if json.Unmarshal(body, &fields) == nil {
			if raw, ok := fields["nextCursor"]; ok {
				var field *string
				if err := json.Unmarshal(raw, &field); err != nil || (field == nil) != (cursor == "") || (field != nil && *field != cursor) {
					t.Fatalf("GET %s: nextCursor %s, header %q", u, raw, cursor)
				}
			}
		}
		if cursor == "" {
			return pages
		}
	}
	t.Fatalf("%s: more than 1000 pages", path)
	return 0
}

// onceEach checks that every wanted item was seen exactly once, nothing
// was seen twice, and the listing took several pages.
func onceEach(t *testing.T, view string, pages int, seen map[string]int, want []string) {
	t.Helper()
	if pages < 2 {
		t.Errorf("%s: %d page(s); the test needs several", view, pages)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s: %s listed %d times", view, k, n)
		}
	}
	for _, k := range want {
		if seen[k] != 1 {
			t.Errorf("%s: %s listed %d times, want once (seen %v)", view, k, seen[k], seen)
		}
	}
}

// Every listing that grows with queues or partitions pages: followed
// cursor by cursor with a small limit, it lists each item exactly once,
// also while messages and queues are added between pages.
func TestPagedViewsListEachItemOnce(t *testing.T) {
	base, ctx := startOne(t)
	cl := e2etest.NewClientAt(t, ctx, base)
	var queues, labels, parts, q0parts []string
	for i := range 5 {
		q := fmt.Sprintf("pg-q%d", i)
		cl.Configure(map[string]any{"queue": q, "namespace": fmt.Sprintf("ns%d", i), "task": fmt.Sprintf("t%d", i),
			"options": map[string]any{"retryLimit": 0}})
		queues, labels = append(queues, q), append(labels, fmt.Sprintf("ns%d", i))
		n := 1
		if i == 0 {
			n = 7
		}
		for p := range n {
			name := fmt.Sprintf("p%d", p)
			cl.Push(e2etest.PushItems(q, name, "first")...)
			parts = append(parts, q+"/"+name)
			if i == 0 {
				q0parts = append(q0parts, name)
			}
		}
	}
	// Consumer groups: three groups take every pg-q0 partition's first
	// message in one auto-ack pop each and one from pg-q1; a second
	// message in each pg-q0 partition is then their lag.
	groups := []string{"ga", "gb", "gc"}
	var groupRows, lagRows, gaItems []string
	for _, g := range groups {
		cl.MustPop(e2etest.PopPath("pg-q0", "batch=10", "partitions=7", "autoAck=true", "subscriptionMode=all", "consumerGroup="+g), 7)
		cl.MustPop(e2etest.PopPath("pg-q1", "batch=1", "autoAck=true", "subscriptionMode=all", "consumerGroup="+g), 1)
		groupRows = append(groupRows, g+"/pg-q0", g+"/pg-q1")
		for _, p := range q0parts {
			lagRows = append(lagRows, g+"/pg-q0/"+p)
		}
	}
	gaItems = append(gaItems, "pg-q1/p0")
	for _, p := range q0parts {
		cl.Push(e2etest.PushItems("pg-q0", p, "second")...)
		gaItems = append(gaItems, "pg-q0/"+p)
	}
	// Dead letters: five failed deliveries in pg-q2.
	cl.Push(e2etest.PushItems("pg-q2", "d", 1, 2, 3, 4, 5)...)
	for range 5 {
		a := cl.MustPop("/api/v1/pop/queue/pg-q2/partition/d?batch=1", 1)
		if r := cl.AckAll(a, "failed"); !r[0].DLQ {
			t.Fatalf("failed ack did not dead-letter: %+v", r)
		}
	}

	t.Run("queues", func(t *testing.T) {
		for _, path := range []string{"/api/v1/resources/queues", "/api/v1/status/queues"} {
			seen := map[string]int{}
			added := 0
			pages := pageAll(t, ctx, base, path, 2, func(body []byte) {
				var page struct{ Queues []struct{ Name string } }
				e2etest.DecodeInto(t, body, &page)
				for _, q := range page.Queues {
					seen[q.Name]++
				}
				// A queue created between pages, keyed before and after
				// the cursor, shifts nothing.
				added++
				cl.Push(e2etest.PushItems(fmt.Sprintf("pg-a%d-%s", added, path[len(path)-6:]), "p", "x")...)
				cl.Push(e2etest.PushItems(fmt.Sprintf("pg-z%d-%s", added, path[len(path)-6:]), "p", "x")...)
			})
			onceEach(t, path, pages, seen, queues)
		}
		for _, path := range []string{"/api/v1/analytics/queue-lag", "/api/v1/analytics/queue-ops",
			"/api/v1/analytics/workload", "/api/v1/analytics/retention"} {
			seen := map[string]int{}
			pages := pageAll(t, ctx, base, path, 2, func(body []byte) {
				var page struct{ Queues []struct{ Queue string } }
				e2etest.DecodeInto(t, body, &page)
				for _, q := range page.Queues {
					if strings.HasPrefix(q.Queue, "pg-q") {
						seen[q.Queue]++
					}
				}
			})
			onceEach(t, path, pages, seen, queues)
		}
	})
	t.Run("labels", func(t *testing.T) {
		for _, path := range []string{"/api/v1/resources/namespaces", "/api/v1/resources/tasks"} {
			seen := map[string]int{}
			pages := pageAll(t, ctx, base, path, 2, func(body []byte) {
				var page struct {
					Namespaces, Tasks []struct{ Namespace, Task string }
				}
				e2etest.DecodeInto(t, body, &page)
				for _, r := range append(page.Namespaces, page.Tasks...) {
					seen[r.Namespace+strings.Replace(r.Task, "t", "ns", 1)]++
				}
			})
			onceEach(t, path, pages, seen, labels)
		}
	})
	t.Run("queue partitions", func(t *testing.T) {
		for _, path := range []string{"/api/v1/resources/queues/pg-q0", "/api/v1/status/queues/pg-q0",
			"/api/v1/resources/queues/pg-q0/depth", "/api/v1/resources/queues/pg-q0/sizes",
			"/api/v1/resources/partitions?queue=pg-q0"} {
			seen := map[string]int{}
			pages := pageAll(t, ctx, base, path, 3, func(body []byte) {
				var page struct {
					Partitions []struct {
						Name      string
						Partition string
					}
					Totals map[string]any
				}
				e2etest.DecodeInto(t, body, &page)
				for _, p := range page.Partitions {
					seen[p.Name+p.Partition]++
				}
			})
			onceEach(t, path, pages, seen, q0parts)
		}
	})
	t.Run("all partitions", func(t *testing.T) {
		for _, path := range []string{"/api/v1/resources/partitions?queue=", "/api/v1/analytics/partition-liveness"} {
			seen := map[string]int{}
			pages := pageAll(t, ctx, base, path, 4, func(body []byte) {
				var page struct {
					Partitions []struct {
						Queue, Name, Partition string
					}
				}
				e2etest.DecodeInto(t, body, &page)
				for _, p := range page.Partitions {
					if strings.HasPrefix(p.Queue, "pg-q") {
						seen[p.Queue+"/"+p.Name+p.Partition]++
					}
				}
			})
			onceEach(t, path, pages, seen, append(parts, "pg-q2/d"))
		}
	})
	t.Run("consumer groups", func(t *testing.T) {
		seen := map[string]int{}
		pages := pageAll(t, ctx, base, "/api/v1/consumer-groups", 2, func(body []byte) {
			var rows []struct{ Name, QueueName string }
			e2etest.DecodeInto(t, body, &rows)
			for _, r := range rows {
				if r.Name != "__QUEUE_MODE__" {
					seen[r.Name+"/"+r.QueueName]++
				}
			}
		})
		onceEach(t, "consumer-groups", pages, seen, groupRows)

		seen = map[string]int{}
		pages = pageAll(t, ctx, base, "/api/v1/consumer-groups/ga", 3, func(body []byte) {
			var byQueue map[string]struct {
				Partitions []struct{ Partition string }
			}
			e2etest.DecodeInto(t, body, &byQueue)
			for q, e := range byQueue {
				for _, p := range e.Partitions {
					seen[q+"/"+p.Partition]++
				}
			}
		})
		onceEach(t, "consumer-groups/ga", pages, seen, gaItems)

		// The second messages lag once they are a second old.
		cl.Eventually(20*time.Second, "lagging rows", func() bool {
			seen = map[string]int{}
			pages = pageAll(t, ctx, base, "/api/v1/consumer-groups/lagging", 5, func(body []byte) {
				var rows []struct {
					Group     string `json:"consumer_group"`
					Queue     string `json:"queue_name"`
					Partition string `json:"partition_name"`
				}
				e2etest.DecodeInto(t, body, &rows)
				for _, r := range rows {
					if r.Group != "__QUEUE_MODE__" {
						seen[r.Group+"/"+r.Queue+"/"+r.Partition]++
					}
				}
			})
			return len(seen) >= len(lagRows)
		})
		onceEach(t, "consumer-groups/lagging", pages, seen, lagRows)
	})
	t.Run("messages", func(t *testing.T) {
		var want []string
		for _, p := range q0parts {
			want = append(want, p+"/0", p+"/1")
		}
		seen := map[string]int{}
		last := "9999"
		pages := pageAll(t, ctx, base, "/api/v1/messages?queue=pg-q0", 3, func(body []byte) {
			var page struct {
				Messages []struct {
					Partition string
					Offset    uint64
					CreatedAt string
				}
			}
			e2etest.DecodeInto(t, body, &page)
			for _, m := range page.Messages {
				seen[fmt.Sprintf("%s/%d", m.Partition, m.Offset)]++
				if m.CreatedAt > last {
					t.Errorf("messages out of order: %s after %s", m.CreatedAt, last)
				}
				last = m.CreatedAt
			}
			// Newer messages pushed between pages come before the
			// cursor: they never shift what is left.
			cl.Push(e2etest.PushItems("pg-q0", "p0", "later")...)
		})
		onceEach(t, "messages", pages, seen, want)
		if len(seen) != len(want) {
			t.Errorf("messages pushed while paging were listed: %v", seen)
		}
	})
	t.Run("dlq", func(t *testing.T) {
		want := []string{"d/0", "d/1", "d/2", "d/3", "d/4"}
		seen := map[string]int{}
		pages := pageAll(t, ctx, base, "/api/v1/dlq?queue=pg-q2", 2, func(body []byte) {
			var page struct {
				Messages []struct {
					Partition string
					Offset    uint64
				}
				Total int
			}
			e2etest.DecodeInto(t, body, &page)
			if page.Total != 5 {
				t.Errorf("dlq total %d, want 5 on every page", page.Total)
			}
			for _, m := range page.Messages {
				seen[fmt.Sprintf("%s/%d", m.Partition, m.Offset)]++
			}
		})
		onceEach(t, "dlq", pages, seen, want)
	})
	// A cursor the server did not give is refused, changing nothing.
	if status, _, body := e2etest.RawRequest(t, ctx, http.MethodGet, base+"/api/v1/resources/queues?cursor=not-json", ""); status != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d %s", status, body)
	}
}

// A seek of a whole queue and a group delete go in raft entries of at most
// wire.GroupStepLimit partitions: with one raft group and more partitions
// than one step (most of them out of a small cache), the seek still moves
// every cursor, the delete drops every one, and the group then reads every
// message once from the start of its kept subscription.
func TestASeekAndADeleteOfMorePartitionsThanOneStep(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 1, Env: map[string]string{"QUEEN_PARTITION_CACHE": "100"}})
	ctx := e2etest.Deadline(t, 150*time.Second)
	base := c.Nodes[0].URL()
	const queue, parts = "stepped", 10_000 // one step is 8,192
	for from := 0; from < parts; from += 1000 {
		var batch []e2etest.PushItem
		for p := from; p < from+1000; p++ {
			batch = append(batch, e2etest.PushItem{Queue: queue, Partition: fmt.Sprintf("c%05d", p), Payload: p})
		}
		if _, code, err := e2etest.Push(ctx, base, batch); err != nil || code != http.StatusCreated {
			t.Fatalf("push: %d %v", code, err)
		}
	}
	var seek struct {
		PartitionsUpdated int `json:"partitionsUpdated"`
	}
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/consumer-groups/g/queues/"+queue+"/seek", map[string]any{"toEnd": true}, 200, &seek)
	if seek.PartitionsUpdated != parts {
		t.Fatalf("seek to the end updated %d partitions, want %d", seek.PartitionsUpdated, parts)
	}
	popAll := e2etest.PopPath(queue, "batch=64", "partitions=64", "autoAck=true", "consumerGroup=g")
	if a, code, err := e2etest.Pop(ctx, base, popAll); err != nil || code != http.StatusNoContent {
		t.Fatalf("after the seek to the end a pop answered %d with %d messages (%v)", code, len(a.Messages), err)
	}
	if _, code, err := e2etest.Push(ctx, base, []e2etest.PushItem{{Queue: queue, Partition: "c09999", Payload: "after"}}); err != nil || code != http.StatusCreated {
		t.Fatalf("push after the seek: %d %v", code, err)
	}
	if a, code, err := e2etest.Pop(ctx, base, popAll); err != nil || len(a.Messages) != 1 || string(a.Messages[0].Data) != `"after"` {
		t.Fatalf("after the seek only the new message is read: %d %+v %v", code, a.Messages, err)
	}

	var del struct {
		DeletedPartitions int `json:"deletedPartitions"`
	}
	e2etest.GetJSON(t, ctx, http.MethodDelete, base+"/api/v1/consumer-groups/g/queues/"+queue+"?deleteMetadata=false", nil, 200, &del)
	if del.DeletedPartitions != parts {
		t.Fatalf("delete dropped the group's cursors in %d partitions, want %d", del.DeletedPartitions, parts)
	}
	seen := map[string]int{}
	for {
		a, code, err := e2etest.Pop(ctx, base, popAll)
		if err != nil || (code != http.StatusOK && code != http.StatusNoContent) {
			t.Fatalf("pop after the delete: %d %v", code, err)
		}
		if len(a.Messages) == 0 {
			break
		}
		for _, m := range a.Messages {
			seen[m.Partition+"/"+string(m.Data)]++
		}
	}
	if len(seen) != parts+1 {
		t.Fatalf("after the delete the group read %d distinct messages, want %d", len(seen), parts+1)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("message %s read %d times", k, n)
		}
	}
}
