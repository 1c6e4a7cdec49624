package broker

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// waitFor polls cond until it holds or testWait passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storedValues reads partition 0 of topic from its log start as key=value
// (tombstones as key=null), with the offsets.
func storedValues(t *testing.T, n *testNode, topic string) []string {
	t.Helper()
	p, ok := n.engine.PartitionAt(wire.DefaultTenant, topic, 0)
	if !ok {
		t.Fatalf("no partition %s/0", topic)
	}
	var out []string
	if _, err := p.Store().Read(p, p.LogStart(), func(off uint64, _ int64, body []byte) bool {
		rec, err := wire.ParseRecord(body)
		if err != nil {
			t.Fatal(err)
		}
		n.engine.OpenRecord(&rec)
		v := string(rec.Payload)
		if rec.Flags&wire.FlagNullValue != 0 {
			v = "null"
		}
		out = append(out, fmt.Sprintf("%d:%s=%s", off, rec.Key, v))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A compacted topic keeps the last record per key at its offset, drops
// tombstones once delete.retention.ms passed, and refuses records without
// a key, as Kafka does.
func TestCompactionKeepsLastRecordPerKey(t *testing.T) {
	n := startNode(t, func(c *Config) { c.LogCleanerInterval = 20 * time.Millisecond })
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	// Any write makes the log due again, whenever the cleaner's passes
	// fall between the produces.
	if code := createTopicWith(t, cl, "kv", map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0",
		"min.cleanable.dirty.ratio": "0.01"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	produce := func(key string, value []byte) {
		t.Helper()
		if err := cl.ProduceSync(ctxFor(t), &kgo.Record{Topic: "kv", Key: []byte(key), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for _, k := range []string{"a", "b", "c"} {
			produce(k, []byte(fmt.Sprintf("%s%d", k, round)))
		}
	}
	produce("c", nil) // offset 9: a tombstone
	produce("a", []byte("a3"))
	want := "[7:b=b2 10:a=a3]"
	waitFor(t, "compaction to "+want, func() bool { return fmt.Sprint(storedValues(t, n, "kv")) == want })
	// A consumer from the start reads across the gaps.
	cons := n.client(kgo.ConsumeTopics("kv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for _, r := range consume(t, cons, 2) {
		got = append(got, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value))
	}
	if fmt.Sprint(got) != want {
		t.Fatalf("consumed %v, want %s", got, want)
	}
	if err := cl.ProduceSync(ctxFor(t), &kgo.Record{Topic: "kv", Value: []byte("no key")}).FirstErr(); err == nil {
		t.Fatal("a record without a key was taken by a compacted topic")
	}
	if hwm(n, "kv", 0) != 11 {
		t.Fatalf("high-water mark %d after compaction, want 11", hwm(n, "kv", 0))
	}
	// The cleaner counts a pass once its proposal returns, which may be
	// just after its result is visible.
	waitFor(t, "the cleaner to count 9 offsets compacted", func() bool { return n.broker.metrics.cleanedByCompaction.Get() >= 9 })
	if got := n.broker.metrics.cleanedByCompaction.Get(); got != 9 {
		t.Fatalf("the cleaner counts %d offsets compacted, want 9", got)
	}
}

// retention.bytes moves the log start over the oldest chunks while what
// remains still holds that many bytes, and keeps the last chunk.
func TestRetentionBytes(t *testing.T) {
	n := startNode(t, func(c *Config) { c.LogCleanerInterval = 20 * time.Millisecond })
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if code := createTopicWith(t, cl, "sized", map[string]string{"retention.bytes": "3000"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	for i := range 10 {
		// Random values: batches are kept as produced, compressed, and
		// retention.bytes counts what the log holds.
		value := make([]byte, 1000)
		_, _ = rand.Read(value)
		r := &kgo.Record{Topic: "sized", Value: value, Key: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(ctxFor(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := n.engine.PartitionAt(wire.DefaultTenant, "sized", 0)
	// Each record is a chunk of a little over 1000 bytes: three stay.
	waitFor(t, "the log start to reach 7", func() bool { return p.LogStart() == 7 })
	if got := len(storedValues(t, n, "sized")); got != 3 {
		t.Fatalf("%d records left", got)
	}
	if code := setTopicConfig(t, cl, "sized", "retention.bytes", "0"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	waitFor(t, "the log start to reach 9", func() bool { return p.LogStart() == 9 })
}

// min.compaction.lag.ms keeps young records out of compaction, and a
// tombstone stays until delete.retention.ms passed. The passes run here
// one by one (the background cleaner waits an hour).
func TestCompactionLagAndTombstoneRetention(t *testing.T) {
	n := startNode(t, func(c *Config) { c.LogCleanerInterval = time.Hour })
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if code := createTopicWith(t, cl, "lagged", map[string]string{"cleanup.policy": "compact",
		"min.compaction.lag.ms": "3600000", "delete.retention.ms": "2000", "min.cleanable.dirty.ratio": "0.01"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	for _, r := range []*kgo.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("a"), Value: []byte("2")},
		{Key: []byte("b"), Value: []byte("1")}, {Key: []byte("b")}} {
		r.Topic = "lagged"
		if err := cl.ProduceSync(ctxFor(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cleaned := map[uint64]cleanState{}
	n.broker.cleanOnce(ctxFor(t), cleaned)
	if got := fmt.Sprint(storedValues(t, n, "lagged")); got != "[0:a=1 1:a=2 2:b=1 3:b=null]" {
		t.Fatalf("records younger than min.compaction.lag.ms compacted: %s", got)
	}
	if code := setTopicConfig(t, cl, "lagged", "min.compaction.lag.ms", "0"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	n.broker.cleanOnce(ctxFor(t), cleaned)
	// The tombstone was appended moments ago: it stays for now.
	if got := fmt.Sprint(storedValues(t, n, "lagged")); got != "[1:a=2 3:b=null]" {
		t.Fatalf("after compaction: %s", got)
	}
	waitFor(t, "the tombstone to go", func() bool {
		n.broker.cleanOnce(ctxFor(t), cleaned)
		return fmt.Sprint(storedValues(t, n, "lagged")) == "[1:a=2]"
	})
}

// An encrypted topic seals each record whole, its key and whether it is a
// tombstone included: compaction reads them opened.
func TestCompactionOfAnEncryptedTopic(t *testing.T) {
	h, e, _ := raftgroupstest.StartKeyed(t)
	n := serveBroker(t, h, e, func(c *Config) { c.LogCleanerInterval = time.Hour })
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if code := createTopicWith(t, cl, "sealed", map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if _, err := e.Configure(ctxFor(t), &wire.ConfigureCmd{Tenant: wire.DefaultTenant, Queue: "sealed",
		Set: wire.OptEncryptionEnabled, Config: wire.QueueConfig{EncryptionEnabled: true}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*kgo.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("1")},
		{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("b")}, {Key: []byte("c"), Value: []byte("1")}} {
		r.Topic = "sealed"
		if err := cl.ProduceSync(ctxFor(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	n.broker.cleanOnce(ctxFor(t), map[uint64]cleanState{})
	if got := fmt.Sprint(storedValues(t, n, "sealed")); got != "[2:a=2 4:c=1]" {
		t.Fatalf("after compaction: %s", got)
	}
}

// A later pass reads the keys only of what was written since the last
// one: a record it compacted stays unless a newer record of its key came.
func TestCompactionAgainAfterMoreWrites(t *testing.T) {
	n := startNode(t, func(c *Config) { c.LogCleanerInterval = time.Hour })
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if code := createTopicWith(t, cl, "again", map[string]string{"cleanup.policy": "compact",
		"min.cleanable.dirty.ratio": "0.01"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	produce := func(kvs ...string) {
		t.Helper()
		for i := 0; i < len(kvs); i += 2 {
			r := &kgo.Record{Topic: "again", Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}
			if err := cl.ProduceSync(ctxFor(t), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cleaned := map[uint64]cleanState{}
	produce("a", "1", "b", "1", "a", "2")
	n.broker.cleanOnce(ctxFor(t), cleaned)
	if got := fmt.Sprint(storedValues(t, n, "again")); got != "[1:b=1 2:a=2]" {
		t.Fatalf("first pass: %s", got)
	}
	produce("b", "2", "c", "1")
	n.broker.cleanOnce(ctxFor(t), cleaned)
	if got := fmt.Sprint(storedValues(t, n, "again")); got != "[2:a=2 3:b=2 4:c=1]" {
		t.Fatalf("second pass: %s", got)
	}
}

// Compaction of a topic written by transactions: an aborted transaction's
// value for a key never supersedes the committed one, and its records and
// markers stay (read_committed clients need the markers the aborted list
// names); a committed later value does supersede.
func TestCompactionLeavesAbortedTransactionsOut(t *testing.T) {
	n := startNode(t, func(c *Config) { c.LogCleanerInterval = 20 * time.Millisecond })
	cl := n.client()
	if code := createTopicWith(t, cl, "tkv", map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	prod := n.client(kgo.TransactionalID("tkv-writer"), kgo.DefaultProduceTopic("tkv"))
	txn := func(end kgo.TransactionEndTry, kvs ...string) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(kvs); i += 2 {
			if err := prod.ProduceSync(ctxFor(t), &kgo.Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctxFor(t), end); err != nil {
			t.Fatal(err)
		}
	}
	txn(kgo.TryCommit, "a", "a1", "b", "b1") // 0, 1, marker 2
	txn(kgo.TryAbort, "a", "a2", "b", "b2")  // 3, 4 aborted, marker 5
	txn(kgo.TryCommit, "b", "b3")            // 6, marker 7
	// b1 is superseded by b3; a1 stays (a2 was aborted); the aborted
	// records and every marker stay.
	commit, abort := "\x00\x00\x00\x01=\x00\x00\x00\x00\x00\x00", "\x00\x00\x00\x00=\x00\x00\x00\x00\x00\x00"
	want := "[0:a=a1 2:" + commit + " 3:a=a2 4:b=b2 5:" + abort + " 6:b=b3 7:" + commit + "]"
	waitFor(t, "compaction", func() bool { return len(storedValues(t, n, "tkv")) == 7 })
	if got := fmt.Sprint(storedValues(t, n, "tkv")); got != want {
		t.Fatalf("after compaction:\n%q\nwant\n%q", got, want)
	}
	cons := n.client(kgo.ConsumeTopics("tkv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for _, r := range consume(t, cons, 2) {
		got = append(got, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value))
	}
	if fmt.Sprint(got) != "[0:a=a1 6:b=b3]" {
		t.Fatalf("read_committed after compaction: %v", got)
	}
}
