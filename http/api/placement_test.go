package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// A queue's partitions go round-robin over the raft groups
// (docs/placement.md), so these tests see one queue spread over every
// group of the test node and check each front-door view shows it whole.

// spreadQueue pushes one message to each of partitions p0..p(n-1) of queue
// and checks they landed in every group.
func spreadQueue(t *testing.T, n *node, queue string, parts int) {
	t.Helper()
	var items []map[string]any
	for i := 0; i < parts; i++ {
		items = append(items, map[string]any{"queue": queue, "partition": fmt.Sprintf("p%d", i), "payload": map[string]int{"n": i}})
	}
	var pushed []pushAnswer
	if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": items}, &pushed); code != http.StatusCreated {
		t.Fatalf("push: %d", code)
	}
	for _, a := range pushed {
		if a.Status != "queued" {
			t.Fatalf("push: %+v", pushed)
		}
	}
	groups := map[uint16]bool{}
	for i := 0; i < parts; i++ {
		d, ok := n.engine.DirByName(wire.DefaultTenant, queue, fmt.Sprintf("p%d", i))
		if !ok {
			t.Fatalf("partition p%d is not in the directory", i)
		}
		groups[d.Group] = true
	}
	if len(groups) != raftgroupstest.Groups {
		t.Fatalf("%d partitions landed in %d groups, want all %d", parts, len(groups), raftgroupstest.Groups)
	}
}

func postJSON(t *testing.T, url string, body, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v (%s)", url, err, raw)
		}
	}
	return resp.StatusCode
}

// GET /api/v1/resources/queues/:queue, the queue list and the Prometheus
// families show a queue whose partitions live in different groups as one
// queue with all its partitions and messages.
func TestQueueSpreadOverGroupsIsShownWhole(t *testing.T) {
	n := startNode(t)
	const parts = 6
	spreadQueue(t, n, "spread", parts)

	var detail struct {
		Name       string `json:"name"`
		Partitions []struct {
			Name     string        `json:"name"`
			Index    uint32        `json:"index"`
			Messages messageCounts `json:"messages"`
		} `json:"partitions"`
		Totals messageCounts `json:"totals"`
	}
	if code := getJSON(t, n.url+"/api/v1/resources/queues/spread", &detail); code != http.StatusOK {
		t.Fatalf("queue detail: %d", code)
	}
	if len(detail.Partitions) != parts || detail.Totals.Total != parts || detail.Totals.Pending != parts {
		t.Fatalf("queue detail: %+v", detail)
	}
	for i, p := range detail.Partitions {
		if p.Index != uint32(i) || p.Name != fmt.Sprintf("p%d", i) || p.Messages.Total != 1 {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}

	var list struct {
		Queues []queueListItem `json:"queues"`
	}
	if code := getJSON(t, n.url+"/api/v1/resources/queues", &list); code != http.StatusOK || len(list.Queues) != 1 {
		t.Fatalf("queue list: %d %+v", code, list)
	}
	if q := list.Queues[0]; q.Partitions != parts || q.Messages.Total != parts {
		t.Fatalf("queue list item: %+v", q)
	}

	resp, err := http.Get(n.url + "/metrics/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	prom, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var lines []string
	for _, l := range strings.Split(string(prom), "\n") {
		if strings.HasPrefix(l, "queen_queue_partitions{") && strings.Contains(l, `queue="spread"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.HasSuffix(lines[0], fmt.Sprintf(" %d", parts)) {
		t.Fatalf("queen_queue_partitions for the queue: %q", lines)
	}
}

type poppedMessage struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Partition     string `json:"partition"`
	LeaseID       string `json:"leaseId"`
}

// A pop that names no partition finds messages in the partitions of every
// group: one pop claiming many partitions gathers them all, and pops of
// one partition each go round every partition. Acks of those messages
// (routed by partition id) complete the queue.
func TestPopWithoutPartitionReachesEveryGroup(t *testing.T) {
	n := startNode(t)
	const parts = 6
	spreadQueue(t, n, "wide", parts)
	spreadQueue(t, n, "narrow", parts)

	var all struct {
		Messages          []poppedMessage `json:"messages"`
		PartitionsClaimed int             `json:"partitionsClaimed"`
	}
	if code := getJSON(t, n.url+"/api/v1/pop/queue/wide?batch=100&partitions=64", &all); code != http.StatusOK {
		t.Fatalf("pop of many partitions: %d", code)
	}
	if len(all.Messages) != parts || all.PartitionsClaimed != parts {
		t.Fatalf("pop of many partitions got %d messages from %d partitions, want %d", len(all.Messages), all.PartitionsClaimed, parts)
	}

	// One partition per pop: the queue-mode lease holds a popped
	// partition, so each pop must find another one, in whichever group.
	var seen []string
	var acks []map[string]any
	for i := 0; i < parts; i++ {
		var one struct {
			Messages []poppedMessage `json:"messages"`
		}
		if code := getJSON(t, n.url+"/api/v1/pop/queue/narrow", &one); code != http.StatusOK || len(one.Messages) != 1 {
			t.Fatalf("pop %d: %d %+v (seen %v)", i, code, one, seen)
		}
		m := one.Messages[0]
		seen = append(seen, m.Partition)
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID})
	}
	slices.Sort(seen)
	if want := []string{"p0", "p1", "p2", "p3", "p4", "p5"}; !slices.Equal(seen, want) {
		t.Fatalf("pops found partitions %v, want %v", seen, want)
	}
	if code := getJSON(t, n.url+"/api/v1/pop/queue/narrow", nil); code != http.StatusNoContent {
		t.Fatalf("pop after every partition is leased: %d", code)
	}

	var acked []ackAnswer
	if code := postJSON(t, n.url+"/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, &acked); code != http.StatusOK {
		t.Fatalf("ack: %d", code)
	}
	for _, a := range acked {
		if !a.Success {
			t.Fatalf("ack: %+v", acked)
		}
	}
	var detail struct {
		Totals messageCounts `json:"totals"`
	}
	if code := getJSON(t, n.url+"/api/v1/resources/queues/narrow", &detail); code != http.StatusOK || detail.Totals.Completed != parts {
		t.Fatalf("after the acks: %d %+v", code, detail.Totals)
	}
}

// /health lists every raft group with its leader and term.
func TestHealthListsEveryGroupsLeader(t *testing.T) {
	n := startNode(t)
	var h struct {
		Status string `json:"status"`
		Groups []struct {
			Group  int    `json:"group"`
			Role   string `json:"role"`
			Leader uint64 `json:"leader"`
			Term   uint64 `json:"term"`
		} `json:"groups"`
	}
	if code := getJSON(t, n.url+"/health", &h); code != http.StatusOK || len(h.Groups) != raftgroupstest.Groups {
		t.Fatalf("health: %d %+v", code, h)
	}
	for i, g := range h.Groups {
		if g.Group != i || g.Leader != 1 || g.Term == 0 || g.Role != "leader" {
			t.Fatalf("group %d: %+v", i, g)
		}
	}
}

// Trace events live in their partition's group; by name they are merged
// over every group, newest first, and limit keeps the newest.
func TestTracesByNameMergeGroupsNewestFirst(t *testing.T) {
	n := startNode(t)
	const parts = raftgroupstest.Groups
	spreadQueue(t, n, "traced", parts)
	const events = 2 * parts
	for i := 0; i < events; i++ {
		p, ok := n.engine.PartitionNamed(wire.DefaultTenant, "traced", fmt.Sprintf("p%d", i%parts))
		if !ok {
			t.Fatalf("partition p%d", i%parts)
		}
		ev := map[string]any{"transactionId": fmt.Sprintf("t%d", i), "partitionId": fmt.Sprint(p.ID),
			"eventType": fmt.Sprintf("e%d", i), "traceNames": []string{"order-1"}}
		if code := postJSON(t, n.url+"/api/v1/traces", ev, nil); code != http.StatusCreated {
			t.Fatalf("trace %d: %d", i, code)
		}
		time.Sleep(3 * time.Millisecond) // distinct replicated times in every group
	}
	var got struct {
		Traces []traceAnswer `json:"traces"`
	}
	if code := getJSON(t, n.url+"/api/v1/traces/by-name/order-1?limit="+fmt.Sprint(parts), &got); code != http.StatusOK {
		t.Fatalf("by name: %d", code)
	}
	var types, want []string
	for _, tr := range got.Traces {
		types = append(types, tr.EventType)
	}
	for i := events - 1; i >= events-parts; i-- {
		want = append(want, fmt.Sprintf("e%d", i))
	}
	if !slices.Equal(types, want) {
		t.Fatalf("traces by name: %v, want the newest %v", types, want)
	}
}
