package faults

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Exactly once through SIGKILLs: the classic Kafka read-process-write loop
// (docs/reliability.md, "Exactly once"). A copier consumes topic eos-in in
// a consumer group and produces every record to eos-out inside the
// transaction that also commits the consumed offsets (franz-go's
// GroupTransactSession), aborting every fifth transaction on purpose,
// while rounds of SIGKILL hit the leader of a raft group holding the
// topics' partitions or the coordinator of the copier's transactional id.
// At the end a read_committed consumer must see every input record in
// eos-out exactly once, and none from an aborted transaction.

const (
	eosIn    = "eos-in"
	eosOut   = "eos-out"
	eosGroup = "eos-copy"
	eosTxnID = "eos-copier"
	eosParts = 6
	// eosBatch is the most records one transaction copies.
	eosBatch = 20
	// eosAbortEvery: every eosAbortEvery-th transaction is aborted on
	// purpose once its records are produced.
	eosAbortEvery = 5
)

// txnOutcome is how a copier transaction ended, as the copier saw it.
type txnOutcome int

const (
	txnCommitted        txnOutcome = iota + 1
	txnAbortedOnPurpose            // one of every eosAbortEvery, ended with TryAbort
	txnAborted                     // a produce failed, the group rebalanced, or the commit became an abort
	txnUnknown                     // the commit's End failed: committed or aborted, the client cannot tell
)

// eosCopier is the application under test: one consumer-group member that
// copies eos-in to eos-out in transactions, with a new session (same
// transactional id) whenever franz-go reports the old one failed, as an
// application does. It begins no transaction once limit records are
// committed, so the test can spread the input over its rounds.
type eosCopier struct {
	c   *harness.Cluster
	log *e2etest.RingLog // franz-go's log of every session, shown on failure

	limit         atomic.Int64 // set by the test only
	stop          atomic.Bool
	committedTxns atomic.Int64
	committedRecs atomic.Int64
	done          chan struct{}

	mu        sync.Mutex
	outcome   map[int]txnOutcome
	acked     map[string]kPos // copy (value in eos-out) → where its produce was acknowledged
	sessions  int
	fetchErrs int
	notes     []string // why sessions were replaced, the first few fetch errors
	fatal     error    // the copier could not go on
}

func newEOSCopier(c *harness.Cluster) *eosCopier {
	return &eosCopier{c: c, log: &e2etest.RingLog{Max: 1 << 20}, done: make(chan struct{}),
		outcome: map[int]txnOutcome{}, acked: map[string]kPos{}}
}

func (cp *eosCopier) note(format string, args ...any) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.notes) < 200 {
		cp.notes = append(cp.notes, time.Now().UTC().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
}

func (cp *eosCopier) fatalErr() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.fatal
}

// newSession is a transactional consumer-group member with the copier's
// one transactional id: its InitProducerId fences any earlier session
// and aborts what that one left open.
func (cp *eosCopier) newSession() (*kgo.GroupTransactSession, error) {
	var seeds []string
	for _, n := range cp.c.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	cp.mu.Lock()
	cp.sessions++
	name := fmt.Sprintf("eos-copier-%d", cp.sessions)
	cp.mu.Unlock()
	return kgo.NewGroupTransactSession(
		kgo.SeedBrokers(seeds...), kgo.ClientID(name),
		kgo.TransactionalID(eosTxnID), kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(eosGroup), kgo.ConsumeTopics(eosIn),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.DefaultProduceTopic(eosOut), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.WithLogger(kgo.BasicLogger(cp.log, kgo.LogLevelInfo, func() string { return name + " " + time.Now().UTC().Format("15:04:05.000 ") })),
	)
}

// run copies until stop is set (between transactions) or ctx ends.
func (cp *eosCopier) run(ctx context.Context) {
	defer close(cp.done)
	var sess *kgo.GroupTransactSession
	defer func() {
		if sess != nil {
			sess.Close()
		}
	}()
	txn := 0
	for !cp.stop.Load() && ctx.Err() == nil {
		if cp.committedRecs.Load() >= cp.limit.Load() {
			_ = harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
				return cp.stop.Load() || cp.committedRecs.Load() < cp.limit.Load(), nil
			})
			continue
		}
		if sess == nil {
			s, err := cp.newSession()
			if err != nil {
				cp.mu.Lock()
				cp.fatal = fmt.Errorf("new transact session: %w", err)
				cp.mu.Unlock()
				return
			}
			sess = s
			// Fence the previous session first, as a Java application's
			// initTransactions() does before it polls: its InitProducerId
			// aborts a transaction the previous session left open, whose
			// staged offsets would otherwise hold this session's
			// require_stable OffsetFetch until the transaction's timeout.
			ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
			if _, _, err := sess.Client().ProducerID(ictx); err != nil {
				cp.note("new session: init producer id: %v (franz-go tries again at the first produce)", err)
			}
			cancel()
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollRecords(pctx, eosBatch)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			cp.mu.Lock()
			cp.fetchErrs++
			n := cp.fetchErrs
			cp.mu.Unlock()
			if n <= 10 {
				cp.note("fetch %s/%d: %v", topic, p, err)
			}
		})
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		txn++
		if !cp.copyBatch(ctx, sess, txn, recs) {
			sess.Close()
			sess = nil
		}
	}
}

// copyBatch copies recs in transaction number txn and reports whether the
// session can go on.
func (cp *eosCopier) copyBatch(ctx context.Context, sess *kgo.GroupTransactSession, txn int, recs []*kgo.Record) bool {
	if err := sess.Begin(); err != nil {
		// What is uncommitted is consumed again by the next session.
		cp.note("transaction %d: begin: %v: a new session takes over", txn, err)
		return false
	}
	onPurpose := txn%eosAbortEvery == 0
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		out[i] = &kgo.Record{Topic: eosOut, Partition: r.Partition, Key: r.Key, Value: []byte(fmt.Sprintf("%s@%d", r.Value, txn))}
	}
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res := sess.ProduceSync(tctx, out...)
	cp.mu.Lock()
	for _, pr := range res {
		if pr.Err == nil {
			cp.acked[string(pr.Record.Value)] = kPos{pr.Record.Partition, pr.Record.Offset}
		}
	}
	cp.mu.Unlock()
	produceErr := res.FirstErr()
	end := kgo.TryCommit
	if onPurpose || produceErr != nil {
		end = kgo.TryAbort
	}
	committed, err := sess.End(tctx, end)
	var o txnOutcome
	switch {
	case end == kgo.TryAbort && onPurpose && produceErr == nil:
		o = txnAbortedOnPurpose // even if its End failed: an abort never commits
	case end == kgo.TryAbort:
		o = txnAborted
	case err != nil:
		o = txnUnknown
	case committed:
		o = txnCommitted
	default:
		o = txnAborted
	}
	cp.mu.Lock()
	cp.outcome[txn] = o
	cp.mu.Unlock()
	if o == txnCommitted {
		cp.committedRecs.Add(int64(len(recs)))
		cp.committedTxns.Add(1)
	}
	if produceErr != nil {
		cp.note("transaction %d: produce: %v", txn, produceErr)
	}
	if err != nil {
		// No error of End is retryable (franz-go): the application makes
		// a new session with the same transactional id.
		cp.note("transaction %d: end (commit=%v): %v: a new session takes over", txn, end == kgo.TryCommit, err)
		return false
	}
	return true
}

// waitCommits waits until the copier has committed n more transactions,
// letting it past its budget when it reaches that first.
func (cp *eosCopier) waitCommits(ctx context.Context, n int64, within time.Duration) error {
	target := cp.committedTxns.Load() + n
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	err := harness.Poll(wctx, 20*time.Millisecond, func() (bool, error) {
		if err := cp.fatalErr(); err != nil {
			return false, err
		}
		if cp.committedTxns.Load() >= target {
			return true, nil
		}
		if r := cp.committedRecs.Load(); r >= cp.limit.Load() {
			cp.limit.Store(r + eosBatch)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d more transactions committed: %w", cp.committedTxns.Load()-(target-n), n, err)
	}
	return nil
}

// counts are the copier's transactions by outcome.
func (cp *eosCopier) counts() map[txnOutcome]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := map[txnOutcome]int{}
	for _, o := range cp.outcome {
		out[o]++
	}
	return out
}

// stuck describes a copier that stopped making progress.
func (cp *eosCopier) stuck(ctx context.Context, what string, err error) string {
	cp.mu.Lock()
	notes := strings.Join(cp.notes, "\n")
	cp.mu.Unlock()
	return fmt.Sprintf("%s at %s: %v (committed: %d transactions, %d records)\ncopier notes:\n%s\n%s\n%s\ncopier client log tail:\n%s",
		what, time.Now().UTC().Format("15:04:05.000"), err, cp.committedTxns.Load(), cp.committedRecs.Load(), notes,
		brokerViews(ctx, cp.c, eosOut), (&workload{c: cp.c}).groupViews(), cp.log.Tail(8000))
}

// eosGroupsOf is the raft groups holding the partitions of topics.
func eosGroupsOf(ctx context.Context, t *testing.T, c *harness.Cluster, topics ...string) []int {
	t.Helper()
	set := map[int]bool{}
	for _, topic := range topics {
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			p := e2etest.PlacementOf(ctx, t, c.Nodes[0].URL(), topic)
			if p.Queue == nil || len(p.Queue.Partitions) < eosParts {
				return false, nil
			}
			for _, part := range p.Queue.Partitions {
				set[part.Group] = true
			}
			return true, nil
		}); err != nil {
			t.Fatalf("placement of %s: %v", topic, err)
		}
	}
	var out []int
	for g := range set {
		out = append(out, g)
	}
	sort.Ints(out)
	return out
}

// eosCoordinator is the node coordinating the copier's transactional id
// (FindCoordinator, key type 1).
func eosCoordinator(ctx context.Context, c *harness.Cluster, admin *kgo.Client) (*harness.Node, error) {
	var node *harness.Node
	err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorType = eosTxnID, 1
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.ErrorCode != 0 {
			return false, nil
		}
		for _, n := range c.Nodes {
			if int32(n.ID) == resp.NodeID && n.Running() {
				node = n
				return true, nil
			}
		}
		return false, nil
	})
	return node, err
}

// eosEnds waits until no transaction is open in topic (every partition's
// last stable offset is its high-water mark) and returns those ends.
func eosEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	ends := map[int32]int64{}
	var last string
	err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		hwm, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = hwm.Error()
		}
		lso, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err2 == nil {
			err2 = lso.Error()
		}
		if err != nil || err2 != nil {
			last = fmt.Sprintf("list offsets: %v / %v", err, err2)
			return false, nil
		}
		var open []string
		for p := int32(0); p < eosParts; p++ {
			h, ok1 := hwm.Lookup(topic, p)
			l, ok2 := lso.Lookup(topic, p)
			if !ok1 || !ok2 || h.Offset != l.Offset {
				open = append(open, fmt.Sprintf("p%d hwm %d lso %d", p, h.Offset, l.Offset))
			}
			ends[p] = h.Offset
		}
		last = strings.Join(open, ", ")
		return len(open) == 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: transactions still open (%s): %w", topic, last, err)
	}
	return ends, nil
}

// eosRead reads eos-out from its start with a fresh consumer at level,
// markers included, until every partition is read to its end; it returns
// the data records.
func eosRead(ctx context.Context, c *harness.Cluster, level kgo.IsolationLevel, ends map[int32]int64) ([]*kgo.Record, error) {
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("eos-checker"), kgo.ConsumeTopics(eosOut),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	next := map[int32]int64{}
	readAll := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	var ferr []string
	for !readAll() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("read stopped at %v of %v (fetch errors: %v): %w", next, ends, ferr, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			if len(ferr) < 10 {
				ferr = append(ferr, fmt.Sprintf("%s/%d: %v", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out, nil
}

// eosCopy parses a copy's value: the input record's number and the
// transaction that copied it.
func eosCopy(v []byte) (rec, txn int, ok bool) {
	s, t, found := strings.Cut(string(v), "@")
	if !found || !strings.HasPrefix(s, "rec-") {
		return 0, 0, false
	}
	rec, err1 := strconv.Atoi(strings.TrimPrefix(s, "rec-"))
	txn, err2 := strconv.Atoi(t)
	return rec, txn, err1 == nil && err2 == nil
}

// Rounds of SIGKILL under a transactional copier: odd rounds kill the
// leader of a raft group holding partitions of eos-in or eos-out, even
// rounds the coordinator of the copier's transactional id; each waits
// until the copier commits with the node dead, restarts it and waits until
// the copier commits with it back. Then eos-out, read read_committed,
// holds every record of eos-in exactly once (none missing, none twice, in
// eos-in's order, none from an aborted transaction), and read
// read_uncommitted it holds the aborted copies too.
// QUEEN_FAULT_EXACTLY_ONCE_ROUNDS sets the rounds (3 by default, for CI).
func TestFaultExactlyOnceReadProcessWrite(t *testing.T) {
	rounds := faultRounds(t, "QUEEN_FAULT_EXACTLY_ONCE_ROUNDS", 3)
	start := time.Now()
	c := startFaultCluster(t, false, e2etest.GroupEnv)
	ctx := e2etest.Deadline(t, 2*time.Minute+time.Duration(rounds)*45*time.Second)
	rng := faultRand(t)
	admin := e2etest.KgoClient(t, c)
	adm := kadm.NewClient(admin)
	e2etest.WaitBrokers(ctx, t, admin, len(c.Nodes))
	e2etest.CreateTopicOn(ctx, t, admin, eosIn, eosParts)
	e2etest.CreateTopicOn(ctx, t, admin, eosOut, eosParts)
	groups := eosGroupsOf(ctx, t, c, eosIn, eosOut)

	// The input: n distinct records, record i in partition i mod 6, by an
	// idempotent producer with acks=all. Enough of them that every round
	// has its share (a round copies about 100 records at most beyond it).
	n := max(2000, 200*rounds)
	in := make([]kPos, n)
	prod := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic(eosIn), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(n))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: int32(i % eosParts), Key: []byte(fmt.Sprintf("key-%05d", i)), Value: []byte(fmt.Sprintf("rec-%05d", i))}
	}
	// ProduceSync answers in the order records were acknowledged.
	for _, r := range prod.ProduceSync(ctx, recs...) {
		var i int
		if _, err := fmt.Sscanf(string(r.Record.Value), "rec-%d", &i); err != nil || r.Err != nil {
			t.Fatalf("filling %s: %s: %v %v", eosIn, r.Record.Value, err, r.Err)
		}
		in[i] = kPos{r.Record.Partition, r.Record.Offset}
	}
	t.Logf("%s filled with %d records; the topics' partitions are in raft groups %v", eosIn, n, groups)

	cp := newEOSCopier(c)
	copyCtx, stopCopy := context.WithCancel(ctx)
	t.Cleanup(func() { stopCopy(); <-cp.done })
	go cp.run(copyCtx)

	per := int64(n / (rounds + 1))
	leaderKills, coordKills := 0, 0
	for r := 1; r <= rounds; r++ {
		// This round's share of the input, and at least a few batches.
		cp.limit.Store(max(int64(r)*per, cp.committedRecs.Load()+3*eosBatch))
		if err := cp.waitCommits(ctx, 1, 60*time.Second); err != nil {
			t.Fatal(cp.stuck(ctx, fmt.Sprintf("round %d, before the kill", r), err))
		}
		var victim *harness.Node
		var why string
		if r%2 == 1 {
			g := groups[rng.IntN(len(groups))]
			victim = c.Nodes[e2etest.GroupLeader(t, ctx, c, g)]
			why = fmt.Sprintf("the leader of group %d", g)
			leaderKills++
		} else {
			var err error
			if victim, err = eosCoordinator(ctx, c, admin); err != nil {
				t.Fatalf("round %d: finding the coordinator of %s: %v", r, eosTxnID, err)
			}
			why = "the coordinator of " + eosTxnID
			coordKills++
		}
		if coord, err := eosCoordinator(ctx, c, admin); err == nil && coord == victim && r%2 == 1 {
			why += ", also the transaction coordinator"
		}
		victim.Kill()
		killedAt := time.Now()
		if err := cp.waitCommits(ctx, 2, 60*time.Second); err != nil {
			t.Fatal(cp.stuck(ctx, fmt.Sprintf("round %d, node %d (%s) killed", r, victim.ID, why), err))
		}
		recovered := time.Since(killedAt)
		if err := c.Start(victim); err != nil {
			t.Fatal(err)
		}
		hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := c.WaitAllHealthy(hctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: node %d back: %v", r, victim.ID, err)
		}
		if err := cp.waitCommits(ctx, 1, 60*time.Second); err != nil {
			t.Fatal(cp.stuck(ctx, fmt.Sprintf("round %d, node %d (%s) back", r, victim.ID, why), err))
		}
		t.Logf("round %d: killed node %d (%s); the copier committed twice within %v; back and committing after %v (committed: %d transactions, %d records)",
			r, victim.ID, why, recovered.Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond),
			cp.committedTxns.Load(), cp.committedRecs.Load())
	}

	// The rest of the input, then the copier stops: done once the group's
	// committed offsets are eos-in's ends (a transaction whose end the
	// copier did not see may have committed, so its own count can stay
	// short).
	cp.limit.Store(math.MaxInt64)
	inEnds := map[int32]int64{}
	for _, at := range in {
		inEnds[at.partition] = max(inEnds[at.partition], at.offset+1)
	}
	var behind string
	dctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	err := harness.Poll(dctx, 100*time.Millisecond, func() (bool, error) {
		if err := cp.fatalErr(); err != nil {
			return false, err
		}
		offs, err := adm.FetchOffsets(dctx, eosGroup)
		if err != nil {
			behind = err.Error()
			return false, nil
		}
		var lag []string
		for p, end := range inEnds {
			o, ok := offs.Lookup(eosIn, p)
			if !ok || o.Err != nil || o.At < end {
				lag = append(lag, fmt.Sprintf("p%d at %d of %d", p, o.At, end))
			}
		}
		sort.Strings(lag)
		behind = strings.Join(lag, ", ")
		return len(lag) == 0, nil
	})
	cancel()
	if err != nil {
		t.Fatal(cp.stuck(ctx, "copying the rest", fmt.Errorf("group %s: %s: %w", eosGroup, behind, err)))
	}
	cp.stop.Store(true)
	<-cp.done

	// Read back.
	ectx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	ends, err := eosEnds(ectx, adm, eosOut)
	if err != nil {
		t.Fatal(err)
	}
	committedRead, err := eosRead(ectx, c, kgo.ReadCommitted(), ends)
	if err != nil {
		t.Fatal("read_committed:", err)
	}
	uncommittedRead, err := eosRead(ectx, c, kgo.ReadUncommitted(), ends)
	if err != nil {
		t.Fatal("read_uncommitted:", err)
	}

	cp.mu.Lock()
	outcome, acked, sessions, fetchErrs := cp.outcome, cp.acked, cp.sessions, cp.fetchErrs
	notes := append([]string(nil), cp.notes...)
	cp.mu.Unlock()
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 1000 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}

	// read_committed: each input record once, where and in the order it
	// was read, from no aborted transaction.
	seen := make([]int, n)
	lastIn := map[int32]int64{} // eos-out partition → eos-in offset of its last copy
	var duplicates, missing, abortedVisible, phantom, misplaced, reordered int
	for _, r := range committedRead {
		i, txn, ok := eosCopy(r.Value)
		if !ok || i < 0 || i >= n || outcome[txn] == 0 {
			phantom++
			problem("%s/%d@%d holds %q, which the copier never produced", eosOut, r.Partition, r.Offset, r.Value)
			continue
		}
		if seen[i]++; seen[i] > 1 {
			duplicates++
			problem("rec-%05d visible %d times (this copy by transaction %d at %d/%d)", i, seen[i], txn, r.Partition, r.Offset)
		}
		if o := outcome[txn]; o == txnAbortedOnPurpose || o == txnAborted {
			abortedVisible++
			problem("rec-%05d visible from transaction %d, which was aborted (outcome %d), at %d/%d", i, txn, o, r.Partition, r.Offset)
		}
		if r.Partition != in[i].partition {
			misplaced++
			problem("rec-%05d of %s/%d copied to %s/%d", i, eosIn, in[i].partition, eosOut, r.Partition)
		}
		if prev, ok := lastIn[r.Partition]; ok && in[i].offset <= prev {
			reordered++
			problem("%s/%d@%d: rec-%05d (input offset %d) after input offset %d", eosOut, r.Partition, r.Offset, i, in[i].offset, prev)
		}
		lastIn[r.Partition] = in[i].offset
	}
	for i, k := range seen {
		if k == 0 {
			missing++
			problem("rec-%05d (%s/%d@%d) is not visible in %s", i, eosIn, in[i].partition, in[i].offset, eosOut)
		}
	}

	// read_uncommitted: every acknowledged copy, aborted ones included,
	// stored once.
	copies := map[string]int{}
	abortedInLog, twiceInLog, ackedLost := 0, 0, 0
	for _, r := range uncommittedRead {
		v := string(r.Value)
		if copies[v]++; copies[v] == 2 {
			twiceInLog++
			problem("copy %s stored twice (again at %d/%d)", v, r.Partition, r.Offset)
		}
		if _, txn, ok := eosCopy(r.Value); ok && copies[v] == 1 && outcome[txn] == txnAbortedOnPurpose {
			abortedInLog++
		}
	}
	for v, at := range acked {
		if copies[v] == 0 {
			ackedLost++
			problem("copy %s acknowledged at %d/%d is not in the log", v, at.partition, at.offset)
		}
	}
	counts := cp.counts()
	if counts[txnAbortedOnPurpose] == 0 || abortedInLog == 0 {
		problem("no aborted copy in the log (%d transactions aborted on purpose): the run proved nothing about aborts", counts[txnAbortedOnPurpose])
	}

	elapsed := time.Since(start).Round(time.Second)
	line := fmt.Sprintf("FAULT-FIGURES fault=exactly-once rounds=%d kafka_acked=%d checked=%d lost=%d duplicated=%d reordered=%d phantom=%d misplaced=%d aborted_visible=%d "+
		"leader_kills=%d coordinator_kills=%d txn_committed=%d txn_aborted_on_purpose=%d txn_aborted=%d txn_unknown=%d sessions=%d "+
		"log_records=%d aborted_copies_in_log=%d stored_twice=%d acked_copies_lost=%d elapsed=%v",
		rounds, n, len(committedRead), missing, duplicates, reordered, phantom, misplaced, abortedVisible,
		leaderKills, coordKills, counts[txnCommitted], counts[txnAbortedOnPurpose], counts[txnAborted], counts[txnUnknown], sessions,
		len(uncommittedRead), abortedInLog, twiceInLog, ackedLost, elapsed)
	fmt.Println(line)
	t.Log(line)
	t.Logf("%d rounds in %v: kills %d leaders / %d coordinator; transactions %d committed, %d aborted on purpose, %d aborted otherwise, %d ended unseen; "+
		"%d records: %d duplicates, %d missing, %d visible from aborted transactions; read_uncommitted %d records, %d of them aborted copies; %d sessions, %d fetch errors",
		rounds, elapsed, leaderKills, coordKills, counts[txnCommitted], counts[txnAbortedOnPurpose], counts[txnAborted], counts[txnUnknown],
		n, duplicates, missing, abortedVisible, len(uncommittedRead), abortedInLog, sessions, fetchErrs)
	if len(notes) > 0 {
		t.Logf("copier notes:\n%s", strings.Join(notes, "\n"))
	}
	for i, p := range problems {
		if i == 30 {
			t.Errorf("... %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("copier client log tail:\n%s", cp.log.Tail(8000))
	}
}
