package standby

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

const (
	linkToken = "e2e-standby-link-token-0123456789abcdef"
	groups    = 3
	topic     = "kt"
	queue     = "hq"
	kgroup    = "kg"
)

// acked records when each write was acknowledged by the source.
type acked struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newAcked() *acked { return &acked{at: map[string]time.Time{}} }

func (a *acked) add(k string) {
	a.mu.Lock()
	a.at[k] = time.Now()
	a.mu.Unlock()
}

func (a *acked) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// since counts the keys acknowledged at or after t.
func (a *acked) since(t time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, at := range a.at {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// split is the keys acknowledged before cutoff and after it.
func (a *acked) split(cutoff time.Time) (before, after []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, at := range a.at {
		if at.Before(cutoff) {
			before = append(before, k)
		} else {
			after = append(after, k)
		}
	}
	return before, after
}

// commitAt is a consumer group commit the source acknowledged.
type commitAt struct {
	at      time.Time
	offsets map[int32]int64
}

// standbyHealth is /health's standby block.
type standbyHealth struct {
	Following  bool   `json:"following"`
	Source     string `json:"source"`
	LagEntries uint64 `json:"lagEntries"`
	LagMs      int64  `json:"lagMs"`
	Groups     []struct {
		Applied uint64 `json:"appliedSourceIndex"`
	} `json:"groups"`
}

func health(ctx context.Context, n *harness.Node) (*standbyHealth, error) {
	var out struct {
		Standby *standbyHealth `json:"standby"`
	}
	if _, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/health", nil, &out); err != nil {
		return nil, err
	}
	if out.Standby == nil {
		return nil, errors.New("no standby block in /health")
	}
	return out.Standby, nil
}

// load is the source's workload: HTTP pushes, pops and acks, KV puts, an
// idempotent Kafka producer and a consumer group committing what it read.
type load struct {
	http, kv, kafka *acked
	popAcked        *acked // messages group "workers" popped and acknowledged
	mu              sync.Mutex
	commits         []commitAt
	stop            atomic.Bool
	wg              sync.WaitGroup
	errs            atomic.Int64
}

func (l *load) run(t *testing.T, ctx context.Context, src *harness.Cluster) {
	n := len(src.Nodes)
	l.wg.Add(4)
	go func() { // HTTP pushes, one record a request, round the nodes
		defer l.wg.Done()
		for i := 0; !l.stop.Load(); i++ {
			txn := "h-" + strconv.Itoa(i)
			res, code, err := e2etest.Push(ctx, src.Nodes[i%n].URL(), []e2etest.PushItem{{Queue: queue,
				Partition: "p" + strconv.Itoa(i%groups), Payload: map[string]int{"n": i}, TransactionID: txn}})
			if err == nil && code == http.StatusCreated && len(res) == 1 && res[0].Error == "" {
				l.http.add(txn)
			} else {
				l.errs.Add(1)
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	go func() { // HTTP pops and acks of consumer group "workers"
		defer l.wg.Done()
		for i := 0; !l.stop.Load(); i++ {
			base := src.Nodes[i%n].URL()
			ans, code, err := e2etest.Pop(ctx, base, "/api/v1/pop/queue/"+queue+"?batch=10&wait=false&consumerGroup=workers&subscriptionMode=all")
			if err != nil || code != http.StatusOK || len(ans.Messages) == 0 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for _, m := range ans.Messages {
				body := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
					"status": "completed", "consumerGroup": "workers"}
				if code, err := e2etest.Call(ctx, http.MethodPost, base+"/api/v1/ack", body, nil); err == nil && code == http.StatusOK {
					l.popAcked.add(m.TransactionID)
				}
			}
		}
	}()
	go func() { // KV puts
		defer l.wg.Done()
		for i := 0; !l.stop.Load(); i++ {
			key := "k" + strconv.Itoa(i)
			a, code, err := e2etest.KVCall(ctx, src.Nodes[i%n].URL(), map[string]any{"op": "put", "ns": "app", "key": key, "value": i})
			if err == nil && code == http.StatusOK && a.OK {
				l.kv.add(key)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	var seeds []string
	for _, n := range src.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RecordDeliveryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cons := e2etest.KgoClient(t, src, kgo.ConsumerGroup(kgroup), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	go func() { // the idempotent producer and the consumer group, one loop
		defer l.wg.Done()
		var inflight sync.WaitGroup
		defer inflight.Wait()
		defer prod.Close() // fails what is still buffered once the source is gone
		for i := 0; !l.stop.Load(); i++ {
			v := "v-" + strconv.Itoa(i)
			inflight.Add(1)
			prod.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer inflight.Done()
				if err == nil {
					l.kafka.add(v)
				}
			})
			if i%20 != 19 {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			cons.PollFetches(pctx)
			cancel()
			if err := cons.CommitUncommittedOffsets(ctx); err == nil {
				offs := map[int32]int64{}
				for p, eo := range cons.CommittedOffsets()[topic] {
					offs[p] = eo.Offset
				}
				if len(offs) > 0 { // assigned and committed something
					l.mu.Lock()
					l.commits = append(l.commits, commitAt{at: time.Now(), offsets: offs})
					l.mu.Unlock()
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// lastCommitBefore is the last commit the source acknowledged before
// cutoff, per partition.
func (l *load) lastCommitBefore(cutoff time.Time) map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32]int64{}
	for _, c := range l.commits {
		if c.at.Before(cutoff) {
			for p, o := range c.offsets {
				out[p] = max(out[p], o)
			}
		}
	}
	return out
}

// TestStandbyTakesOverAfterTheSourceDies: a 3-node source under HTTP and
// Kafka load is followed by a 1-node standby; once the standby reports
// lag 0 every source node is SIGKILLed; the standby refuses writes on both
// doors until promoted, then holds every record, KV write and consumer
// group commit the source acknowledged before the lag it reported, none
// twice, and the consumer group resumes from its committed offsets.
func TestStandbyTakesOverAfterTheSourceDies(t *testing.T) {
	takeOver(t, 1)
}

// TestThreeNodeStandbyTakesOver is the same with a 3-node standby.
func TestThreeNodeStandbyTakesOver(t *testing.T) {
	takeOver(t, 3)
}

func takeOver(t *testing.T, standbyNodes int) {
	ctx := e2etest.Deadline(t, 8*time.Minute)
	src := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: groups, Env: map[string]string{"QUEEN_LINK_TOKEN": linkToken}})
	var addrs []string
	for _, n := range src.Nodes {
		addrs = append(addrs, n.RaftAddr)
	}
	admin := e2etest.KgoClient(t, src)
	e2etest.WaitBrokers(ctx, t, admin, 3)
	e2etest.CreateTopicOn(ctx, t, admin, topic, groups)
	sb := e2etest.StartCluster(t, harness.Options{Nodes: standbyNodes, Groups: groups,
		Env: map[string]string{"QUEEN_STANDBY_OF": strings.Join(addrs, ","), "QUEEN_LINK_TOKEN": linkToken}})
	sbn := sb.Nodes[0]
	if !sbn.Grep("standby of " + strings.Join(addrs, ",")) {
		t.Fatal("the standby's boot log does not name its source")
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	l := &load{http: newAcked(), kv: newAcked(), kafka: newAcked(), popAcked: newAcked()}
	l.run(t, loadCtx, src)
	defer func() { l.stop.Store(true); stopLoad(); l.wg.Wait() }()

	// A transaction the source never ends: promotion aborts it.
	txn := e2etest.KgoClient(t, src, kgo.TransactionalID("standby-open-txn"), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(2*time.Minute))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("tx-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("a transactional record: %v", err)
		}
	}

	// Load runs a while; the standby's lag is sampled meanwhile.
	var maxEntries uint64
	var maxMs int64
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		if h, err := health(ctx, sbn); err == nil {
			maxEntries, maxMs = max(maxEntries, h.LagEntries), max(maxMs, h.LagMs)
		}
		l.mu.Lock()
		commits := len(l.commits)
		l.mu.Unlock()
		return l.http.len() >= 400 && l.kafka.len() >= 1000 && l.kv.len() >= 200 && commits >= 5, nil
	}); err != nil {
		t.Fatalf("load: http %d kafka %d kv %d: %v", l.http.len(), l.kafka.len(), l.kv.len(), err)
	}
	// Kill the source the moment the standby reports it is caught up (or,
	// if it never is for a minute under this load, with the lag it
	// reports then).
	var at *standbyHealth
	var sampled time.Time
	caught, cancelCaught := context.WithTimeout(ctx, time.Minute)
	err := harness.Poll(caught, 10*time.Millisecond, func() (bool, error) {
		h, err := health(caught, sbn)
		if err != nil || !h.Following {
			return false, nil
		}
		at, sampled = h, time.Now()
		return h.LagEntries == 0, nil
	})
	cancelCaught()
	if at == nil {
		t.Fatalf("no standby state on /health: %v", err)
	}
	killAt := time.Now()
	var kills sync.WaitGroup
	for _, n := range src.Nodes {
		kills.Add(1)
		go func(n *harness.Node) { defer kills.Done(); n.Kill() }(n)
	}
	kills.Wait()
	l.stop.Store(true)
	stopLoad()
	l.wg.Wait()
	t.Logf("killed the source %v after the standby reported lag %d entries, %d ms (max under load %d entries, %d ms); acknowledged: %d HTTP records, %d Kafka records, %d KV puts; in the last second before the kill: %d, %d, %d",
		killAt.Sub(sampled), at.LagEntries, at.LagMs, maxEntries, maxMs, l.http.len(), l.kafka.len(), l.kv.len(),
		l.http.since(killAt.Add(-time.Second)), l.kafka.since(killAt.Add(-time.Second)), l.kv.since(killAt.Add(-time.Second)))

	_, _, metrics := e2etest.RawRequest(t, ctx, http.MethodGet, sbn.URL()+"/metrics/prometheus", "")
	for _, m := range []string{`queen_standby_lag_entries{group="0"}`, `queen_standby_lag_ms{group="2"}`} {
		if !strings.Contains(string(metrics), m) {
			t.Errorf("/metrics/prometheus on the standby has no %s", m)
		}
	}

	// Read-only until promoted, on both doors.
	code, _, body := e2etest.RawRequest(t, ctx, http.MethodPut, sbn.URL()+"/api/v1/kv/app/refused", `{"value":1}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"standby"`) {
		t.Fatalf("a KV write on the standby: %d %s", code, body)
	}
	sbKafka := e2etest.KafkaClient(t, sbn, kgo.DisableIdempotentWrite(), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(10*time.Second))
	if err := sbKafka.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("refused")}).FirstErr(); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("a Kafka produce on the standby: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}

	var promoted struct {
		Promoted    bool     `json:"promoted"`
		SourceIndex []uint64 `json:"sourceIndex"`
		AbortedTxns int      `json:"abortedTxns"`
	}
	e2etest.GetJSON(t, ctx, http.MethodPost, sbn.URL()+"/api/v1/system/standby/promote", nil, http.StatusOK, &promoted)
	if !promoted.Promoted || len(promoted.SourceIndex) != groups || promoted.AbortedTxns < 1 {
		t.Fatalf("promote: %+v (the source's open transaction must be aborted)", promoted)
	}
	if h, err := health(ctx, sbn); err != nil || h.Following {
		t.Fatalf("after promotion: %+v %v", h, err)
	}
	cutoff := sampled.Add(-time.Duration(at.LagMs) * time.Millisecond)
	verifyHTTP(t, ctx, sbn, l.http, cutoff, killAt)
	verifyPops(t, ctx, sbn, l.popAcked, cutoff)
	verifyKV(t, ctx, sbn, l.kv, cutoff, killAt)
	verifyKafka(t, ctx, sbn, l, cutoff, killAt)

	// Writable now, on both doors.
	if a, code, err := e2etest.KVCall(ctx, sbn.URL(), map[string]any{"op": "put", "ns": "app", "key": "after", "value": 1}); err != nil || code != http.StatusOK || !a.OK {
		t.Fatalf("a KV write after promotion: %d %v %+v", code, err, a)
	}
	after := e2etest.KafkaClient(t, sbn, kgo.RecordDeliveryTimeout(30*time.Second))
	if err := after.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("a Kafka produce after promotion: %v", err)
	}
}

// readSlack is how much older than the reported lag an acknowledged write
// may be and still be missing: a clock tolerance only. The follower reads
// each group from the source's leader (which acknowledges after it
// applies) and counts lagMs from a leader's last answer otherwise, so the
// lag bounds the age of a missing acknowledged write, up to the time the
// leader's answer takes to reach the standby (docs/standby.md, "Lag").
const readSlack = 50 * time.Millisecond

// report logs what the source acknowledged and what the standby holds,
// and fails t if a write acknowledged more than the reported lag plus
// readSlack before the kill is missing.
func report(t *testing.T, what string, a *acked, have map[string]bool, cutoff, killAt time.Time) {
	t.Helper()
	before, after := a.split(cutoff)
	missing, missingAfter, missingOld := 0, 0, 0
	var newest time.Duration = -1
	for _, k := range before {
		if !have[k] {
			missing++
			a.mu.Lock()
			age := killAt.Sub(a.at[k])
			a.mu.Unlock()
			if newest < 0 || age < newest {
				newest = age
			}
			if age > killAt.Sub(cutoff)+readSlack {
				missingOld++
			}
		}
	}
	for _, k := range after {
		if !have[k] {
			missingAfter++
		}
	}
	newestMissing := "none"
	if newest >= 0 {
		newestMissing = "the newest acknowledged " + newest.String() + " before the kill"
	}
	t.Logf("FIGURES %s: acknowledged %d (%d before the cutoff, %d in the last %v before the kill or during it); missing on the standby: %d before the cutoff (%s), %d after it",
		what, len(before)+len(after), len(before), len(after), killAt.Sub(cutoff), missing, newestMissing, missingAfter)
	if missingOld > 0 {
		t.Errorf("%s: %d records acknowledged more than the reported lag + %v before the kill are missing on the standby", what, missingOld, readSlack)
	}
}

func verifyHTTP(t *testing.T, ctx context.Context, n *harness.Node, a *acked, cutoff, killAt time.Time) {
	t.Helper()
	have := map[string]bool{}
	for p := range groups {
		recs, _, err := e2etest.FetchAll(ctx, n.URL(), queue, "p"+strconv.Itoa(p))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if have[r.TransactionID] {
				t.Errorf("HTTP record %s is on the standby twice", r.TransactionID)
			}
			have[r.TransactionID] = true
		}
	}
	report(t, "HTTP records", a, have, cutoff, killAt)
}

// verifyPops: HTTP consumer group "workers" goes on from its position on
// the promoted standby: it pops nothing the source acknowledged for it
// before the reported lag (what is still leased comes back only once its
// lease expires per the replicated clock, after this check).
func verifyPops(t *testing.T, ctx context.Context, n *harness.Node, acks *acked, cutoff time.Time) {
	t.Helper()
	before, after := acks.split(cutoff)
	old := map[string]bool{}
	for _, k := range before {
		old[k] = true
	}
	popped, again := 0, 0
	for range 1000 {
		ans, code, err := e2etest.Pop(ctx, n.URL(), "/api/v1/pop/queue/"+queue+"?batch=100&wait=false&consumerGroup=workers&subscriptionMode=all")
		if err != nil || (code != http.StatusOK && code != http.StatusNoContent) {
			t.Fatalf("pop on the promoted standby: %d %v", code, err)
		}
		if len(ans.Messages) == 0 {
			break
		}
		for _, m := range ans.Messages {
			popped++
			if old[m.TransactionID] {
				again++
			}
			body := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
				"status": "completed", "consumerGroup": "workers"}
			if code, err := e2etest.Call(ctx, http.MethodPost, n.URL()+"/api/v1/ack", body, nil); err != nil || code != http.StatusOK {
				t.Fatalf("ack on the promoted standby: %d %v", code, err)
			}
		}
	}
	t.Logf("FIGURES HTTP consumer group: %d messages acknowledged on the source (%d within the lag); the promoted standby handed out %d, %d of them acknowledged before the lag",
		len(before)+len(after), len(after), popped, again)
	if again > 0 {
		t.Errorf("%d messages the source acknowledged for the group before the reported lag were handed out again", again)
	}
}

func verifyKV(t *testing.T, ctx context.Context, n *harness.Node, a *acked, cutoff, killAt time.Time) {
	t.Helper()
	have := map[string]bool{}
	before, after := a.split(cutoff)
	for _, key := range append(before, after...) {
		var got struct {
			Found bool `json:"found"`
			Value any  `json:"value"`
		}
		if code, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/api/v1/kv/app/"+key, nil, &got); err != nil || code != http.StatusOK {
			t.Fatalf("KV get %s: %d %v", key, code, err)
		}
		if got.Found && fmt.Sprint(got.Value) == strings.TrimPrefix(key, "k") {
			have[key] = true
		}
	}
	report(t, "KV puts", a, have, cutoff, killAt)
}

func verifyKafka(t *testing.T, ctx context.Context, n *harness.Node, l *load, cutoff, killAt time.Time) {
	t.Helper()
	cl := e2etest.KafkaClient(t, n)
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	if err := harness.Poll(ctx, 200*time.Millisecond, func() (bool, error) {
		var err error
		ends, err = adm.ListEndOffsets(ctx, topic)
		return err == nil && ends.Error() == nil, nil
	}); err != nil {
		t.Fatalf("end offsets on the promoted standby: %v", err)
	}
	// The open transaction was aborted: nothing holds the last stable
	// offset back.
	lso, cancelLSO := context.WithTimeout(ctx, time.Minute)
	defer cancelLSO()
	if err := harness.Poll(lso, 200*time.Millisecond, func() (bool, error) {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil || stable.Error() != nil {
			return false, nil
		}
		for p, o := range ends[topic] {
			if s, ok := stable.Lookup(topic, p); !ok || s.Offset < o.Offset {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		stable, _ := adm.ListCommittedOffsets(ctx, topic)
		t.Fatalf("the last stable offset stays behind the end after promotion: %v (stable %v, ends %v)", err, stable, ends)
	}
	// Every record, read from the start.
	reader := e2etest.KafkaClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	have := map[string]bool{}
	next := map[int32]int64{}
	offsets := map[int32][]int64{} // each partition's data records, in order
	done := func() bool {
		for p, o := range ends[topic] {
			if next[p] < o.Offset {
				return false
			}
		}
		return true
	}
	// A partition's last offset may be a transaction marker, never
	// handed out as a record: reading stops at the end or after 3 s
	// with nothing new.
	for idle := 0; !done() && idle < 3; {
		if ctx.Err() != nil {
			t.Fatalf("reading the standby's topic: %v (at %v, ends %v)", ctx.Err(), next, ends[topic])
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := reader.PollFetches(pctx)
		cancel()
		if fs.NumRecords() == 0 {
			idle++
			continue
		}
		idle = 0
		fs.EachRecord(func(r *kgo.Record) {
			if have[string(r.Value)] {
				t.Errorf("Kafka record %s is on the standby twice", r.Value)
			}
			have[string(r.Value)] = true
			next[r.Partition] = r.Offset + 1
			offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
		})
	}
	report(t, "Kafka records", l.kafka, have, cutoff, killAt)

	// The consumer group's commits are there, and it resumes from them.
	fetched, err := adm.FetchOffsets(ctx, kgroup)
	if err != nil {
		t.Fatalf("consumer group offsets on the standby: %v", err)
	}
	want := l.lastCommitBefore(cutoff)
	committed := map[int32]int64{}
	for p, o := range want {
		got, ok := fetched.Lookup(topic, p)
		if !ok || got.At < o {
			t.Errorf("partition %d: the standby's committed offset %d (found %v), the source acknowledged %d before the cutoff", p, got.At, ok, o)
		}
		committed[p] = got.At
	}
	t.Logf("FIGURES consumer group: committed on the standby %v, last acknowledged before the cutoff %v", committed, want)
	member := e2etest.KafkaClient(t, n, kgo.ConsumerGroup(kgroup), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	// Where the member must start: the first data record at or after the
	// commit. A partition may end in control records (the abort marker
	// promotion wrote, a commit marker) that a consumer never sees, so a
	// commit below the end offset can still leave nothing to read.
	expect := map[int32]int64{}
	first := map[int32]int64{}
	for p, o := range committed {
		i, _ := slices.BinarySearch(offsets[p], o)
		if i == len(offsets[p]) {
			first[p], expect[p] = o, o // nothing left to read there
			continue
		}
		expect[p] = offsets[p][i]
	}
	for len(first) < len(committed) {
		if ctx.Err() != nil {
			t.Fatalf("the consumer group did not resume: %v", first)
		}
		member.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
	}
	for p, o := range committed {
		if first[p] != expect[p] {
			t.Errorf("partition %d: the consumer group resumed at %d, committed %d, the first record from there is at %d", p, first[p], o, expect[p])
		}
	}
}

// TestStandbyRefusesAnotherGroupCount: a standby runs its source's raft
// group count; an explicit QUEEN_RAFT_GROUPS that differs stops the boot
// with one line saying so.
func TestStandbyRefusesAnotherGroupCount(t *testing.T) {
	ctx := e2etest.Deadline(t, 2*time.Minute)
	src := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2, Env: map[string]string{"QUEEN_LINK_TOKEN": linkToken}})
	sb, err := harness.NewCluster(e2etest.QueenBinary(t), harness.Options{Nodes: 1, Groups: 3, BaseDir: t.TempDir(),
		Env: map[string]string{"QUEEN_STANDBY_OF": src.Nodes[0].RaftAddr, "QUEEN_LINK_TOKEN": linkToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	n := sb.Nodes[0]
	if err := sb.Start(n); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return !n.Running(), nil }); err != nil {
		t.Fatalf("the standby started with another group count: %v", err)
	}
	if n.ExitCode() != 1 || !n.Grep("QUEEN_RAFT_GROUPS=3, the source runs 2 raft groups") {
		t.Fatalf("exit %d, log:\n%s", n.ExitCode(), n.Tail(2000))
	}
}
