package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// testWait bounds every wait in these tests.
const testWait = 20 * time.Second

// testNode is one in-process queen node: raft groups, engine and broker.
type testNode struct {
	t      *testing.T
	host   *raftgroups.Host
	engine *raftgroups.Engine
	broker *Broker
	addr   string
}

func freeAddr(t *testing.T) string { return raftgroupstest.FreeAddr(t) }

var quiet = raftgroupstest.Quiet

// startNode starts a single node with a broker whose config edit may
// adjust, and stops it when the test ends.
func startNode(t *testing.T, edit func(*Config)) *testNode {
	t.Helper()
	h, e := raftgroupstest.Start(t)
	addr := freeAddr(t)
	cfg := Config{Listener: kafka.Config{Addr: addr}, NodeID: 1, AdvertisedAddr: addr, LogDir: "/data"}
	if edit != nil {
		edit(&cfg)
	}
	b, err := New(cfg, e, quiet)
	if err == nil {
		err = b.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the broker closes before the host.
	t.Cleanup(func() { _ = b.Close() })
	return &testNode{t: t, host: h, engine: e, broker: b, addr: addr}
}

// client returns a franz-go client of the node, closed when the test ends.
func (n *testNode) client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.addr), kgo.RetryTimeout(testWait)}, opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

// consume polls until n records arrived or the deadline.
func consume(t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx := ctxFor(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

func rec(topic string, i int) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i)),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}}
}
