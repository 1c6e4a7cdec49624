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
	"github.com/queen-mq/queen/wire"
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
	return serveBroker(t, h, e, edit)
}

// serveBroker starts a broker over a started node's engine.
func serveBroker(t *testing.T, h *raftgroups.Host, e *raftgroups.Engine, edit func(*Config)) *testNode {
	t.Helper()
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

// httpPush pushes to a queue's partition by name as the HTTP API does,
// creating both when missing.
func httpPush(t *testing.T, e *raftgroups.Engine, push wire.PushCmd) {
	t.Helper()
	out, err := e.Push(ctxFor(t), push.Tenant, []wire.PushCmd{push})
	if err != nil || out[0].Err != nil || out[0].Code != wire.CodeOK {
		t.Fatalf("push to %s/%s: %v %+v", push.Queue, push.Partition, err, out)
	}
}

// hwm is the high-water mark of a topic's partition, read from the raft
// group holding it.
func hwm(n *testNode, topic string, index uint32) uint64 {
	p, ok := n.engine.PartitionAt(wire.DefaultTenant, topic, index)
	if !ok {
		n.t.Fatalf("no partition %s/%d", topic, index)
	}
	return p.HighWatermark()
}

// raftGroupsOf lists the raft group holding each partition of a topic, by
// index.
func raftGroupsOf(t *testing.T, e *raftgroups.Engine, topic string, partitions int) []int {
	t.Helper()
	out := make([]int, partitions)
	for i := range out {
		d, ok := e.DirByIndex(wire.DefaultTenant, topic, uint32(i))
		if !ok {
			t.Fatalf("no directory entry for %s/%d", topic, i)
		}
		out[i] = int(d.Group)
	}
	return out
}

// distinct counts the different values of xs.
func distinct(xs []int) int {
	seen := map[int]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}
