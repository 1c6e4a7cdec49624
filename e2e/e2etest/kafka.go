package e2etest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/harness"
)

// KgoClient is a franz-go client seeded with every running node of c,
// closed when the test ends.
func KgoClient(t *testing.T, c *harness.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("e2e-data")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// KafkaClient is a franz-go client of one node, closed when the test ends.
func KafkaClient(t *testing.T, n *harness.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr), kgo.ClientID("e2e")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// KafkaRequest sends one request to the client's seed broker.
func KafkaRequest[R kmsg.Response](ctx context.Context, t *testing.T, cl *kgo.Client, r kmsg.Request) R {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(ctx, r)
	if err != nil {
		t.Fatalf("%T: %v", r, err)
	}
	return resp.(R)
}

// KafkaRefusal is the error of one Metadata request with no retries: what a
// client that may not connect gets.
func KafkaRefusal(t *testing.T, c *harness.Cluster, opts ...kgo.Opt) error {
	t.Helper()
	cl := KgoClient(t, c, append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// WaitBrokers waits until Metadata lists n brokers: every node registered
// its advertised address.
func WaitBrokers(ctx context.Context, t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err == nil && len(resp.Brokers) == n, nil
	}); err != nil {
		t.Fatalf("metadata never listed %d brokers: %v", n, err)
	}
}

// CreateTopicOn creates a topic through the client (any node accepts it).
func CreateTopicOn(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: partitions, ReplicationFactor: -1}}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return false, nil
		}
		code := resp.Topics[0].ErrorCode
		return code == 0 || code == kerr.TopicAlreadyExists.Code, nil
	}); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// ConsumeN polls cl until it has n records or ctx ends.
func ConsumeN(ctx context.Context, t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		})
		out = append(out, fs.Records()...)
	}
	return out
}

// PollInBackground has cl poll (and so heartbeat and consume) in its own
// goroutine until stop is called or the test ends; stop also closes cl
// and may be called more than once.
func PollInBackground(t *testing.T, cl *kgo.Client) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			cl.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// GroupEnv makes group timers short enough for tests: a 300 ms initial
// rebalance delay and sessions from 500 ms.
var GroupEnv = map[string]string{
	"QUEEN_KAFKA_GROUP_JOIN_DELAY_MS":          "300",
	"QUEEN_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS": "500",
}

// CommitOffsets is CommitOffsetsAs for a dynamic member.
func CommitOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, group, member string, gen int32, offsets map[int32]int64) map[int32]int16 {
	t.Helper()
	return CommitOffsetsAs(ctx, t, cl, group, member, nil, gen, offsets)
}

// CommitOffsetsAs commits offsets of orders as member of group, a static
// member when instance is not nil, and returns each partition's code.
func CommitOffsetsAs(ctx context.Context, t *testing.T, cl *kgo.Client, group, member string, instance *string, gen int32, offsets map[int32]int64) map[int32]int16 {
	t.Helper()
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Group, cr.MemberID, cr.InstanceID, cr.Generation = group, member, instance, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "orders"
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	cr.Topics = append(cr.Topics, rt)
	out := map[int32]int16{}
	for _, t := range KafkaRequest[*kmsg.OffsetCommitResponse](ctx, t, cl, cr).Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

// RingLog keeps the last Max bytes written to it (a client's log) and
// counts the ProducerResetLine lines among all it was given.
type RingLog struct {
	mu     sync.Mutex
	Max    int
	b      []byte
	resets int // ProducerResetLine lines, over the whole run
}

// ProducerResetLine is what franz-go logs when a produce answer makes it
// drop its producer id and sequences.
const ProducerResetLine = "failing the producer ID"

// Write keeps p (io.Writer).
func (r *RingLog) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.Contains(p, []byte(ProducerResetLine)) {
		r.resets++
	}
	r.b = append(r.b, p...)
	if len(r.b) > r.Max {
		r.b = append(r.b[:0], r.b[len(r.b)-r.Max/2:]...)
	}
	return len(p), nil
}

// ProducerResets is how many ProducerResetLine lines were written.
func (r *RingLog) ProducerResets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resets
}

// Tail is the last n bytes kept.
func (r *RingLog) Tail(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.b[max(0, len(r.b)-n):])
}
