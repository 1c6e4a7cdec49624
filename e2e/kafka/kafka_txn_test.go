package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
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

// Transactions spanning both partitions of a topic, two committed and one
// aborted between them: each batch answers its real offset at produce;
// read_committed consumers (franz-go, kcat) see exactly the committed
// records, read_uncommitted ones everything, as from Kafka; HTTP pops and
// the HTTP fetch read committed records only.
func TestKafkaTransactionCommittedAndAborted(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 90*time.Second)
	n := c.Nodes[0]
	admin := e2etest.KgoClient(t, c)
	needsKey(ctx, t, admin, int16(kmsg.FindCoordinator))
	e2etest.CreateTopicOn(ctx, t, admin, "ledger", 2)
	prod := e2etest.KgoClient(t, c, kgo.TransactionalID("ledger-writer"), kgo.DefaultProduceTopic("ledger"))
	next := map[int32]int64{}
	var committed, all []string
	write := func(prefix string, end kgo.TransactionEndTry) {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 25; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if r.Offset < next[r.Partition] {
				t.Fatalf("%s: partition %d answered offset %d after %d", r.Value, r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition] = r.Offset + 1
			all = append(all, string(r.Value))
			if end == kgo.TryCommit {
				committed = append(committed, string(r.Value))
			}
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	write("committed", kgo.TryCommit)
	write("aborted", kgo.TryAbort)
	write("committed-again", kgo.TryCommit)
	if len(next) != 2 {
		t.Fatalf("the transactions wrote to partitions %v, want both", next)
	}
	slices.Sort(committed)
	slices.Sort(all)
	same := func(who string, got, want []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s read %d records:\n%v\nwant %d:\n%v", who, len(got), got, len(want), want)
		}
	}

	for _, level := range []struct {
		name string
		kgo  kgo.IsolationLevel
		want []string
	}{{"read_committed", kgo.ReadCommitted(), committed}, {"read_uncommitted", kgo.ReadUncommitted(), all}} {
		cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("ledger"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(level.kgo))
		var got []string
		for _, r := range e2etest.ConsumeN(ctx, t, cons, len(level.want)) {
			got = append(got, string(r.Value))
		}
		same("franz-go "+level.name, got, level.want)
		if _, err := exec.LookPath("kcat"); err != nil {
			t.Fatal("kcat is not installed (.ci/run installs it)")
		}
		out := kcat(ctx, t, "", "-b", n.KafkaAddr, "-C", "-t", "ledger", "-o", "beginning", "-e", "-q",
			"-X", "isolation.level="+level.name, "-f", "%s\n")
		same("kcat "+level.name, strings.Fields(out), level.want)
	}

	var fetched []string
	for _, p := range []string{"0", "1"} {
		recs, _, err := e2etest.FetchAll(ctx, n.URL(), "ledger", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var v string
			if err := json.Unmarshal(r.Payload, &v); err != nil {
				t.Fatalf("payload %s: %v", r.Payload, err)
			}
			fetched = append(fetched, v)
		}
	}
	same("HTTP fetch", fetched, committed)
	var popped []string
	for range 20 {
		a, code, err := e2etest.Pop(ctx, n.URL(), e2etest.PopPath("ledger", "consumerGroup=http", "subscriptionMode=all", "batch=100", "partitions=2", "autoAck=true"))
		if err != nil || (code != http.StatusOK && code != http.StatusNoContent) {
			t.Fatalf("pop: %d %v", code, err)
		}
		if len(a.Messages) == 0 {
			break
		}
		for _, m := range a.Messages {
			var v string
			if err := json.Unmarshal(m.Data, &v); err != nil {
				t.Fatalf("data %s: %v", m.Data, err)
			}
			popped = append(popped, v)
		}
	}
	same("HTTP pops", popped, committed)
}
