package kafka

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// moveLoad is an idempotent producer (acks=all, franz-go's default)
// writing 0, 1, 2, ... to partition 0 of a topic, remembering the offset
// each value was acknowledged at.
type moveLoad struct {
	t        *testing.T
	prod     *kgo.Client
	mu       sync.Mutex
	offsets  map[int]int64 // value → acknowledged offset
	produced int
	failures chan error
	stop     atomic.Bool
	wg       sync.WaitGroup
}

func startMoveLoad(ctx context.Context, t *testing.T, c *harness.Cluster, topic string, pad int) *moveLoad {
	l := &moveLoad{t: t, offsets: map[int]int64{}, failures: make(chan error, 1)}
	// Uncompressed, so the padding is bytes to copy.
	l.prod = e2etest.KgoClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RetryTimeout(2*time.Minute), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	padding := make([]byte, pad)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; !l.stop.Load() && ctx.Err() == nil; i++ {
			v := i
			l.mu.Lock()
			l.produced++
			l.mu.Unlock()
			l.wg.Add(1)
			l.prod.Produce(ctx, &kgo.Record{Partition: 0, Value: append([]byte(strconv.Itoa(v)+" "), padding...)}, func(r *kgo.Record, err error) {
				defer l.wg.Done()
				if err != nil {
					select {
					case l.failures <- fmt.Errorf("record %d: %w", v, err):
					default:
					}
					return
				}
				l.mu.Lock()
				l.offsets[v] = r.Offset
				l.mu.Unlock()
			})
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond) // a stream, not one burst
			}
		}
	}()
	return l
}

func (l *moveLoad) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.offsets)
}

// waitAcked waits for n acknowledged records, failing on a failed one.
func (l *moveLoad) waitAcked(ctx context.Context, n int) {
	l.t.Helper()
	if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
		select {
		case err := <-l.failures:
			return false, err
		default:
		}
		return l.acked() >= n, nil
	}); err != nil {
		l.t.Fatalf("acknowledged %d of %d: %v", l.acked(), n, err)
	}
}

// finish stops producing, waits for every record's answer and checks each
// was acknowledged.
func (l *moveLoad) finish() int {
	l.t.Helper()
	l.stop.Store(true)
	l.wg.Wait()
	select {
	case err := <-l.failures:
		l.t.Fatal("a record failed:", err)
	default:
	}
	if l.acked() != l.produced {
		l.t.Fatalf("%d records acknowledged of %d produced", l.acked(), l.produced)
	}
	return l.produced
}

// verify reads the whole partition from its start: every acknowledged
// record exactly once, in order, at the offset its produce was answered.
func (l *moveLoad) verify(ctx context.Context, c *harness.Cluster, topic string) {
	l.t.Helper()
	total := len(l.offsets)
	cons := e2etest.KgoClient(l.t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := e2etest.ConsumeN(ctx, l.t, cons, total)
	for i, r := range got {
		var v int
		if _, err := fmt.Sscanf(string(r.Value), "%d", &v); err != nil || v != i {
			l.t.Fatalf("record %d (offset %d) holds %.20q, want %d", i, r.Offset, r.Value, i)
		}
		if r.Offset != l.offsets[v] {
			l.t.Fatalf("value %d at offset %d, acknowledged at %d", v, r.Offset, l.offsets[v])
		}
	}
	l.t.Logf("%d acknowledged records, each exactly once, in order, at its acknowledged offset", total)
}

// moveView is a move as GET /api/v1/system/partitions/moves lists it.
type moveView struct {
	Queue  string `json:"queue"`
	Index  uint32 `json:"index"`
	From   int    `json:"from"`
	To     int    `json:"to"`
	State  string `json:"state"`
	Copied uint64 `json:"copiedOffset"`
	End    uint64 `json:"endOffset"`
	Reason string `json:"reason"`
}

// movesOf lists a queue's moves through the first running node.
func movesOf(ctx context.Context, c *harness.Cluster, queue string) []moveView {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		var out struct{ Moves []moveView }
		if code, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/api/v1/system/partitions/moves?queue="+queue, nil, &out); err == nil && code == http.StatusOK {
			return out.Moves
		}
	}
	return nil
}

// waitMoveEnded waits until the queue's partition 0 move is done.
func waitMoveEnded(ctx context.Context, t *testing.T, c *harness.Cluster, queue string) moveView {
	t.Helper()
	var m moveView
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		for _, mv := range movesOf(ctx, c, queue) {
			if mv.Index == 0 && (mv.State == "done" || mv.State == "failed") {
				m = mv
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the move of %s/0 never ended: %+v", queue, movesOf(ctx, c, queue))
	}
	if m.State != "done" {
		t.Fatalf("move: %+v", m)
	}
	return m
}

// partitionGroup is the raft group holding the queue's partition 0.
func partitionGroup(ctx context.Context, t *testing.T, c *harness.Cluster, queue string) int {
	for _, n := range c.Nodes {
		if n.Running() {
			return e2etest.FirstPartitionGroup(ctx, t, n.URL(), queue)
		}
	}
	t.Fatal("no node running")
	return -1
}

// Moving a partition with kadm's AlterPartitionReassignments on three nodes
// while an idempotent producer writes to it and a consumer group reads
// it: ListPartitionReassignments shows the move in progress, then not;
// Metadata names the new group's leader; every acknowledged record is
// readable exactly once, in order, at its acknowledged offset; the
// group's committed offsets survive the move; HTTP pushes to and pops
// from the moved partition.
func TestKafkaPartitionMoveUnderLoad(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: 3, Env: e2etest.GroupEnv})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	cl := e2etest.KgoClient(t, c)
	adm := adminOf(cl)
	e2etest.WaitBrokers(ctx, t, cl, 3)
	createTopics(ctx, t, adm, 1, "mv")
	if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil {
		t.Fatal(err)
	}
	from := partitionGroup(ctx, t, c, "mv")
	to := (from + 1) % 3
	target := int32(to%3 + 1) // group N is preferred on node (N mod 3)+1

	load := startMoveLoad(ctx, t, c, "mv", 100)
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("mv"), kgo.ConsumerGroup("mvg"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(200*time.Millisecond))
	stopPoll := e2etest.PollInBackground(t, cons)
	load.waitAcked(ctx, 2000)

	// The group's committed offset before the move.
	var before int64
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		offs, err := adm.FetchOffsets(ctx, "mvg")
		if err != nil {
			return false, nil
		}
		o, ok := offs.Lookup("mv", 0)
		before = o.At
		return ok && o.Err == nil && o.At > 0, nil
	}); err != nil {
		t.Fatalf("the consumer group committed nothing: %v", err)
	}

	md, err := adm.Metadata(ctx, "mv")
	if err != nil {
		t.Fatal(err)
	}
	epochBefore := md.Topics["mv"].Partitions[0].LeaderEpoch

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("mv", 0, []int32{target, target%3 + 1, (target+1)%3 + 1})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || res.Error() != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	t.Logf("moving mv/0 from group %d to group %d (broker %d): %s", from, to, target, res["mv"][0].ErrMessage)
	set := kadm.TopicsSet{}
	set.Add("mv", 0)
	sawInProgress := false
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		listed, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			return false, nil
		}
		if len(listed) > 0 {
			sawInProgress = true
			return false, nil
		}
		return true, nil
	}); err != nil {
		t.Fatal("the reassignment stayed listed:", err)
	}
	if !sawInProgress {
		t.Fatal("ListPartitionReassignments never showed the move in progress")
	}
	m := waitMoveEnded(ctx, t, c, "mv")
	if m.From != from || m.To != to {
		t.Fatalf("move %+v, want from %d to %d", m, from, to)
	}
	if g := partitionGroup(ctx, t, c, "mv"); g != to {
		t.Fatalf("mv/0 is in group %d after the move, want %d", g, to)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		md, err := adm.Metadata(ctx, "mv")
		if err != nil {
			return false, nil
		}
		pd := md.Topics["mv"].Partitions[0]
		return pd.Err == nil && pd.Leader == target && pd.LeaderEpoch > epochBefore, nil
	}); err != nil {
		t.Fatalf("Metadata never named broker %d as mv/0's leader at an epoch above %d", target, epochBefore)
	}
	offs, err := adm.FetchOffsets(ctx, "mvg")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("mv", 0); !ok || o.Err != nil || o.At < before {
		t.Fatalf("the group's committed offset after the move: %+v (before: %d)", o, before)
	}

	// Writes go on in the new group.
	load.waitAcked(ctx, load.acked()+1000)
	total := load.finish()
	load.verify(ctx, c, "mv")
	// The group reads on in the new group and commits there up to the end.
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		offs, err := adm.FetchOffsets(ctx, "mvg")
		if err != nil {
			return false, nil
		}
		o, ok := offs.Lookup("mv", 0)
		return ok && o.Err == nil && o.At == int64(total), nil
	}); err != nil {
		offs, _ := adm.FetchOffsets(ctx, "mvg")
		o, _ := offs.Lookup("mv", 0)
		t.Fatalf("the group's committed offset %+v, want %d", o, total)
	}
	stopPoll()

	// HTTP: a push lands after the last produced record, in the new group;
	// a pop reads the partition.
	base := c.Nodes[0].URL()
	pushed, code, err := e2etest.Push(ctx, base, e2etest.PushItems("mv", "0", map[string]any{"http": true}))
	if err != nil || code != http.StatusCreated && code != http.StatusOK || len(pushed) != 1 || pushed[0].Error != "" || pushed[0].Offset != uint64(total) {
		t.Fatalf("HTTP push to the moved partition: %d %v %+v (want offset %d)", code, err, pushed, total)
	}
	ans, code, err := e2etest.Pop(ctx, base, "/api/v1/pop/queue/mv/partition/0?batch=10&consumerGroup=httpg")
	if err != nil || code != http.StatusOK || len(ans.Messages) == 0 || e2etest.GroupOfPID(t, ans.Messages[0].PartitionID) != to {
		t.Fatalf("HTTP pop of the moved partition: %d %v %+v", code, err, ans)
	}
}

// The home's leader is SIGKILLed in the middle of a move: the new leader
// of the home resumes the move from its record and it completes, nothing
// acknowledged lost or doubled.
func TestKafkaPartitionMoveSurvivesHomeLeaderSIGKILL(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: 3})
	ctx := e2etest.Deadline(t, 5*time.Minute)
	cl := e2etest.KgoClient(t, c)
	adm := adminOf(cl)
	e2etest.WaitBrokers(ctx, t, cl, 3)
	createTopics(ctx, t, adm, 1, "mk")
	from := partitionGroup(ctx, t, c, "mk") // a one-partition topic's partition 0 is at its home
	to := (from + 1) % 3

	// A backlog large enough (about 40 MB) that copying it takes a while.
	load := startMoveLoad(ctx, t, c, "mk", 2000)
	load.waitAcked(ctx, 20000)

	body := map[string]any{"queue": "mk", "index": 0, "group": to}
	var started moveView
	if code, err := e2etest.Call(ctx, http.MethodPost, c.Nodes[0].URL()+"/api/v1/system/partitions/moves", body, &started); err != nil || code != http.StatusAccepted {
		t.Fatalf("start the move: %d %v", code, err)
	}
	if code, err := e2etest.Call(ctx, http.MethodPost, c.Nodes[0].URL()+"/api/v1/system/partitions/moves", map[string]any{"queue": "mk", "index": 0, "group": from}, nil); err != nil || code != http.StatusBadRequest {
		t.Fatalf("a move to where the partition is: %d %v", code, err)
	}
	// Kill the home's leader once the copy has begun.
	if err := harness.Poll(ctx, 5*time.Millisecond, func() (bool, error) {
		for _, m := range movesOf(ctx, c, "mk") {
			if m.Index == 0 && (m.Copied > 0 || m.State != "copying") {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the move never started copying")
	}
	// (The kill lands mid-copy unless the copy outran the poll: the log
	// says which step the record was at.)
	leader := e2etest.GroupLeader(t, ctx, c, from)
	var during []moveView
	during = movesOf(ctx, c, "mk")
	killed := c.Nodes[leader]
	killed.Kill()
	t.Logf("killed node %d (leader of the home, group %d) during the move: %+v", killed.ID, from, during)

	m := waitMoveEnded(ctx, t, c, "mk")
	if m.To != to {
		t.Fatalf("move %+v", m)
	}
	load.waitAcked(ctx, load.acked()+1000)
	load.finish()
	if err := c.Start(killed); err != nil {
		t.Fatal(err)
	}
	if err := killed.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if g := partitionGroup(ctx, t, c, "mk"); g != to {
		t.Fatalf("mk/0 in group %d, want %d", g, to)
	}
	load.verify(ctx, c, "mk")
}
