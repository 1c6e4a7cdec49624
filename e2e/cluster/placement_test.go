package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Placement (docs/placement.md) against real nodes: a queue's partitions
// spread over raft groups, their leaders over every node, and the queue
// behaves as one whatever node dies.

// With defaults, a 3-node cluster runs several groups led by different
// nodes, and an 8-partition topic a Kafka client creates has partition
// leaders on all three nodes; every node's /health lists every group with
// its leader.
func TestPartitionLeadersSpreadOverEveryNode(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	admin := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, admin, 3)
	e2etest.CreateTopicOn(ctx, t, admin, "spread", 8)
	var leaders map[int32]bool
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		req := kmsg.NewPtrMetadataRequest()
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("spread")
		req.Topics = append(req.Topics, topic)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 8 {
			return false, nil
		}
		leaders = map[int32]bool{}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader < 1 || p.LeaderEpoch < 1 {
				return false, nil
			}
			leaders[p.Leader] = true
		}
		return len(leaders) == 3, nil
	}); err != nil {
		t.Fatalf("partition leaders %v: %v", leaders, err)
	}
	for _, n := range c.Nodes {
		groups, err := e2etest.GroupsOf(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) < 3 {
			t.Fatalf("node %d runs %d groups by default", n.ID, len(groups))
		}
		for _, g := range groups {
			if g.Leader == 0 || g.Term == 0 {
				t.Fatalf("node %d: group %d without a leader: %+v", n.ID, g.Group, g)
			}
		}
	}
	// Records go to and come back from every partition.
	prod := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 8; p++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprint(p))}).FirstErr(); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("spread"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]string{}
	for _, r := range e2etest.ConsumeN(ctx, t, cons, 8) {
		got[r.Partition] = string(r.Value)
	}
	for p := int32(0); p < 8; p++ {
		if got[p] != fmt.Sprint(p) {
			t.Fatalf("partition %d read back %q", p, got[p])
		}
	}
}

// HTTP consumers of one queue spread over every group find every message
// wherever it lives, never hold two leases on one partition, and lose
// nothing while the node leading one of the groups is SIGKILLed and comes
// back. A long poll wakes on a push to any group.
func TestHTTPPopAcrossGroupsSurvivesSIGKILL(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	base := c.Nodes[0].URL()
	const parts, per = 12, 20
	var all []e2etest.PushItem
	for p := 0; p < parts; p++ {
		for i := 0; i < per; i++ {
			all = append(all, e2etest.PushItem{Queue: "work", Partition: fmt.Sprintf("c%d", p), Payload: fmt.Sprintf("%d-%d", p, i),
				TransactionID: fmt.Sprintf("%d-%d", p, i)})
		}
	}
	if res, code, err := e2etest.Push(ctx, base, all); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v %v", code, err, res)
	}
	pids := e2etest.QueuePartitions(t, ctx, base, "work")
	groups := map[int]bool{}
	for _, pid := range pids {
		groups[e2etest.GroupOfPID(t, pid)] = true
	}
	if len(pids) != parts || len(groups) < 3 {
		t.Fatalf("%d partitions in groups %v", len(pids), groups)
	}

	var (
		mu        sync.Mutex
		delivered = map[string]int{} // transaction id → acks that succeeded
		held      = map[string]string{}
		errs      []string
	)
	consume := func(ctx context.Context, node *harness.Node) {
		for ctx.Err() == nil {
			if !node.Running() {
				return
			}
			ans, code, err := e2etest.Pop(ctx, node.URL(), e2etest.PopPath("work", "batch=5", "partitions=3", "wait=true", "timeout=1000", "leaseSeconds=30"))
			if err != nil || code != http.StatusOK {
				continue
			}
			mu.Lock()
			for _, m := range ans.Messages {
				if l, ok := held[m.PartitionID]; ok && l != m.LeaseID {
					errs = append(errs, fmt.Sprintf("partition %s leased twice: %s and %s", m.PartitionID, l, m.LeaseID))
				}
				held[m.PartitionID] = m.LeaseID
			}
			mu.Unlock()
			// A lease stops counting as held once its ack is sent: the
			// ack releases the partition, and another consumer may pop it
			// before this one hears the answer.
			mu.Lock()
			for _, m := range ans.Messages {
				delete(held, m.PartitionID)
			}
			mu.Unlock()
			var acks []map[string]any
			for _, m := range ans.Messages {
				acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID})
			}
			var res []e2etest.AckResult
			code, err = e2etest.Call(ctx, http.MethodPost, node.URL()+"/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, &res)
			mu.Lock()
			if err == nil && code == http.StatusOK {
				for i, r := range res {
					if r.Success && !r.Noop {
						delivered[ans.Messages[i].TransactionID]++
					}
				}
			}
			mu.Unlock()
		}
	}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(n *harness.Node) { defer wg.Done(); consume(cctx, n) }(c.Nodes[i%2])
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(delivered) }
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return count() > parts*per/4, nil }); err != nil {
		t.Fatal(err)
	}
	// Kill the node that is neither consumer's, then bring it back.
	victim := c.Nodes[2]
	victim.Kill()
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return count() > parts*per/2, nil }); err != nil {
		t.Fatalf("consumption stopped after a SIGKILL: %d of %d", count(), parts*per)
	}
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return count() == parts*per, nil }); err != nil {
		t.Fatalf("consumed %d of %d: %v", count(), parts*per, err)
	}
	stop()
	wg.Wait()
	// A long poll parked on an empty queue wakes on a push to any group.
	// The stopped consumers' own long polls (1 s, on nodes 1 and 2) must
	// be gone first: one of them would take the message for a client no
	// longer listening.
	parked := func() int {
		total := 0
		for _, n := range c.Nodes {
			var p struct {
				Replicas []struct {
					Parked int `json:"parked"`
				} `json:"replicas"`
			}
			if _, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/api/v1/analytics/queue-parked-replicas?queue=work", nil, &p); err != nil || len(p.Replicas) != 1 {
				return -1
			}
			total += p.Replicas[0].Parked
		}
		return total
	}
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) { return parked() == 0, nil }); err != nil {
		t.Fatal("the consumers' long polls never ended:", err)
	}
	woke := make(chan e2etest.PopAnswer, 1)
	go func() {
		a, _, _ := e2etest.Pop(ctx, base, e2etest.PopPath("work", "wait=true", "timeout=20000"))
		woke <- a
	}()
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) { return parked() == 1, nil }); err != nil {
		t.Fatal("the long poll never parked:", err)
	}
	start := time.Now()
	if _, code, err := e2etest.Push(ctx, c.Nodes[1].URL(), []e2etest.PushItem{{Queue: "work", Partition: "c7", Payload: "late"}}); err != nil || code != http.StatusCreated {
		t.Fatalf("late push: %d %v", code, err)
	}
	select {
	case a := <-woke:
		if len(a.Messages) != 1 || string(a.Messages[0].Data) != `"late"` {
			var detail struct {
				Partitions []map[string]any `json:"partitions"`
			}
			e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/work", nil, http.StatusOK, &detail)
			for _, p := range detail.Partitions {
				if p["name"] == "c7" {
					t.Logf("c7: %v", p)
				}
			}
			t.Fatalf("long poll answered %+v after %v", a, time.Since(start))
		}
		t.Logf("long poll woke %v after the push", time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("long poll never woke")
	}
	for tx, n := range delivered {
		if n != 1 {
			t.Errorf("%s acknowledged %d times", tx, n)
		}
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// A queue's options, deletion and views cover every group holding its
// partitions.
func TestQueueOptionsViewsAndDeleteCoverEveryGroup(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 4})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])
	const parts = 8
	for p := 0; p < parts; p++ {
		cl.Push(e2etest.PushItems("opts", fmt.Sprintf("p%d", p), "a", "b")...)
	}
	pids := e2etest.QueuePartitions(t, ctx, cl.Base, "opts")
	groups := map[int]bool{}
	for _, pid := range pids {
		groups[e2etest.GroupOfPID(t, pid)] = true
	}
	if len(pids) != parts || len(groups) < 3 {
		t.Fatalf("%d partitions in groups %v", len(pids), groups)
	}
	// A one-second lease set at the home reaches every group: a popped
	// batch comes back as a redelivery everywhere.
	cl.Configure(map[string]any{"queue": "opts", "options": map[string]any{"leaseTime": 1}})
	first := map[string]bool{}
	for p := 0; p < parts; p++ {
		a := cl.MustPop(e2etest.PopPath("opts", "batch=2", "subscriptionMode=all")+"&partitions=1", 2)
		first[a.PartitionID] = true
	}
	cl.Eventually(15*time.Second, "redelivery in every partition", func() bool {
		a, code := cl.Pop(e2etest.PopPath("opts", "batch=2"))
		if code == http.StatusOK && a.Messages[0].DeliveryAttempt > 1 {
			delete(first, a.PartitionID)
		}
		return len(first) == 0
	})
	// Views and metrics show one queue of 8 partitions.
	var list struct {
		Queues []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
		} `json:"queues"`
	}
	e2etest.GetJSON(t, ctx, http.MethodGet, cl.Base+"/api/v1/resources/queues", nil, http.StatusOK, &list)
	if len(list.Queues) != 1 || list.Queues[0].Partitions != parts {
		t.Fatalf("queue list %+v", list)
	}
	if v, err := e2etest.Metric(ctx, cl.Base, `queen_queue_partitions{tenant="00000000-0000-0000-0000-000000000001",queue="opts"}`); err != nil || v != parts {
		t.Fatalf("partitions metric %v %v", v, err)
	}
	// Retention on: every group deletes its old messages.
	cl.Configure(map[string]any{"queue": "opts", "options": map[string]any{"retentionEnabled": true, "retentionSeconds": 1, "completedRetentionSeconds": 1}})
	cl.Eventually(30*time.Second, "retention in every partition", func() bool {
		for p := 0; p < parts; p++ {
			if _, hwm, start := cl.Log("opts", fmt.Sprintf("p%d", p)); start < hwm {
				return false
			}
		}
		return true
	})
	// Delete removes every partition in every group.
	e2etest.GetJSON(t, ctx, http.MethodDelete, cl.Base+"/api/v1/resources/queues/opts", nil, http.StatusOK, nil)
	var gone e2etest.ErrorAnswer
	if code, _ := e2etest.Call(ctx, http.MethodGet, cl.Base+"/api/v1/resources/queues/opts", nil, &gone); code != http.StatusNotFound {
		t.Fatalf("deleted queue answers %d", code)
	}
	cl.Push(e2etest.PushItems("opts", "p5", "new")...)
	if recs, hwm, _ := cl.Log("opts", "p5"); hwm != 1 || len(recs) != 1 {
		t.Fatalf("a re-created queue inherited the old partition: hwm %d", hwm)
	}
}
