package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/harness"
)

// needsKey skips a test when the node does not serve an API key another
// branch brings (FindCoordinator comes with Kafka consumer groups).
func needsKey(ctx context.Context, t *testing.T, cl *kgo.Client, key int16) {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return
		}
	}
	t.Skipf("the node does not serve %s yet", kmsg.NameForKey(key))
}

// A transaction committed and one aborted: a read_committed consumer (and a
// read_uncommitted one, since aborted records never reach the log) sees
// exactly the committed records, and so does HTTP.
func TestKafkaTransactionCommittedAndAborted(t *testing.T) {
	c := startCluster(t, harness.Options{Nodes: 1})
	ctx := deadline(t, 90*time.Second)
	admin := kgoClient(t, c)
	needsKey(ctx, t, admin, int16(kmsg.FindCoordinator))
	createTopicOn(ctx, t, admin, "ledger", 2)
	prod := kgoClient(t, c, kgo.TransactionalID("ledger-writer"), kgo.DefaultProduceTopic("ledger"))
	write := func(prefix string, end kgo.TransactionEndTry) {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 25; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	write("committed", kgo.TryCommit)
	write("aborted", kgo.TryAbort)
	write("committed-again", kgo.TryCommit)

	for _, level := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
		cons := kgoClient(t, c, kgo.ConsumeTopics("ledger"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(level))
		for _, r := range consumeN(ctx, t, cons, 50) {
			if strings.HasPrefix(string(r.Value), "aborted") {
				t.Fatalf("consumed aborted record %q", r.Value)
			}
		}
	}
	total := 0
	for _, p := range []string{"0", "1"} {
		recs, _, err := fetchAll(ctx, c.Nodes[0].URL(), "ledger", p)
		if err != nil {
			t.Fatal(err)
		}
		total += len(recs)
	}
	if total != 50 {
		t.Fatalf("HTTP fetch sees %d records, want the 50 committed", total)
	}
}
