package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Kafka clients other than franz-go, unchanged and with their default
// settings apart from what a test needs: sarama (IBM) and segmentio's
// kafka-go each produce with acks=all, consume through a consumer group
// with committed offsets, and a second member of the same group resumes
// from those offsets instead of reading again.

const otherClientRecords = 60

// recordLedger checks that values "0".."n-1" each arrived once, in order
// within each partition.
type recordLedger struct {
	mu   sync.Mutex
	seen map[int]int          // value → times delivered
	last map[int32]int64      // partition → last offset
	keys map[string]int32     // key → partition, which must not change
	hdrs map[string]string    // value → header "n"
	fail func(string, ...any) // t.Errorf
}

func newLedger(t *testing.T) *recordLedger {
	return &recordLedger{seen: map[int]int{}, last: map[int32]int64{}, keys: map[string]int32{}, hdrs: map[string]string{}, fail: t.Errorf}
}

func (l *recordLedger) add(partition int32, offset int64, key, value []byte, header string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, err := strconv.Atoi(string(value))
	if err != nil {
		l.fail("record value %q", value)
		return
	}
	if last, ok := l.last[partition]; ok && offset <= last {
		l.fail("partition %d: offset %d after %d", partition, offset, last)
	}
	l.last[partition] = offset
	if p, ok := l.keys[string(key)]; ok && p != partition {
		l.fail("key %s in partitions %d and %d", key, p, partition)
	}
	l.keys[string(key)] = partition
	if header != string(value) {
		l.fail("record %d carries header n=%q", v, header)
	}
	l.seen[v]++
}

func (l *recordLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

func (l *recordLedger) check(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range n {
		if l.seen[i] != 1 {
			t.Errorf("record %d delivered %d times", i, l.seen[i])
		}
	}
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "e2e-sarama"
	cfg.Version = sarama.V3_0_0_0 // sarama caps each request at the versions the broker advertises
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1 // required by sarama's idempotent producer
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false // commit by hand: the test decides when
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

// saramaGroupHandler marks every record it is given until it has seen
// stopAt records in this session, commits, and takes no more, so what it
// consumed is exactly what it committed. Claims run concurrently, one
// per partition, so the handler is locked while it records and commits.
type saramaGroupHandler struct {
	ledger *recordLedger
	stopAt int
	mu     sync.Mutex
	got    int
	done   chan struct{}
}

func (h *saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaGroupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		if !h.take(s, m) {
			return nil
		}
	}
	return nil
}

func (h *saramaGroupHandler) take(s sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.got >= h.stopAt {
		return false
	}
	hdr := ""
	for _, rh := range m.Headers {
		if string(rh.Key) == "n" {
			hdr = string(rh.Value)
		}
	}
	h.ledger.add(m.Partition, m.Offset, m.Key, m.Value, hdr)
	s.MarkMessage(m, "")
	h.got++
	if h.got == h.stopAt {
		// One synchronous commit at the end: sarama shares a connection
		// between fetches and commits, so a commit per record would wait
		// out each parked fetch's MaxWaitTime (as against Apache Kafka).
		s.Commit()
		close(h.done)
	}
	return true
}

// consumeWithSaramaGroup runs one group member until the handler has its
// records or ctx ends, then leaves the group.
func consumeWithSaramaGroup(ctx context.Context, t *testing.T, addrs []string, group, topic string, h *saramaGroupHandler) {
	t.Helper()
	cg, err := sarama.NewConsumerGroup(addrs, group, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		var err error
		for runCtx.Err() == nil && err == nil {
			err = cg.Consume(runCtx, []string{topic}, h)
		}
		errc <- err
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Errorf("sarama group consumed %d records before the deadline", h.ledger.count())
	}
	cancel()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		t.Errorf("sarama consume: %v", err)
	}
	if err := cg.Close(); err != nil {
		t.Errorf("sarama group close: %v", err)
	}
}

func TestSaramaProducesAndConsumesThroughAGroup(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 90*time.Second)
	addrs := []string{c.Nodes[0].KafkaAddr}
	const topic = "sarama-orders"

	admin, err := sarama.NewClusterAdmin(addrs, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	meta, err := admin.DescribeTopics([]string{topic})
	if err != nil || len(meta) != 1 || len(meta[0].Partitions) != 3 {
		t.Fatalf("describe topic: %v %+v", err, meta)
	}
	_ = admin.Close()

	prod, err := sarama.NewSyncProducer(addrs, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range otherClientRecords {
		v := strconv.Itoa(i)
		_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%5)),
			Value: sarama.StringEncoder(v), Headers: []sarama.RecordHeader{{Key: []byte("n"), Value: []byte(v)}}})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}

	// The first member stops halfway, its commits made; the second
	// member of the same group gets exactly the rest.
	ledger := newLedger(t)
	half := otherClientRecords / 2
	consumeWithSaramaGroup(ctx, t, addrs, "sarama-g", topic, &saramaGroupHandler{ledger: ledger, stopAt: half, done: make(chan struct{})})
	consumeWithSaramaGroup(ctx, t, addrs, "sarama-g", topic,
		&saramaGroupHandler{ledger: ledger, stopAt: otherClientRecords - half, done: make(chan struct{})})
	ledger.check(t, otherClientRecords)

	// The committed offsets are the Queen group's position: no lag left.
	row := httpGroup(ctx, t, c.Nodes[0].URL(), "sarama-g", topic)
	if row.TotalLag != 0 || row.PartitionCursors != 3 {
		t.Fatalf("HTTP view of the sarama group: %+v", row)
	}
}

func TestKafkaGoWritesAndReadsThroughAGroup(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 90*time.Second)
	addr := c.Nodes[0].KafkaAddr
	const topic = "kafkago-orders"

	conn, err := kafkago.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.CreateTopics(kafkago.TopicConfig{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	parts, err := conn.ReadPartitions(topic)
	_ = conn.Close()
	if err != nil || len(parts) != 3 {
		t.Fatalf("partitions: %v %+v", err, parts)
	}

	w := &kafkago.Writer{Addr: kafkago.TCP(addr), Topic: topic, Balancer: &kafkago.Hash{},
		RequiredAcks: kafkago.RequireAll, BatchTimeout: 5 * time.Millisecond}
	var msgs []kafkago.Message
	for i := range otherClientRecords {
		v := strconv.Itoa(i)
		msgs = append(msgs, kafkago.Message{Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(v),
			Headers: []kafkago.Header{{Key: "n", Value: []byte(v)}}})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	ledger := newLedger(t)
	read := func(n int) {
		t.Helper()
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, GroupID: "kafkago-g", Topic: topic,
			StartOffset: kafkago.FirstOffset, MaxWait: 200 * time.Millisecond})
		defer func() {
			if err := r.Close(); err != nil {
				t.Errorf("reader close: %v", err)
			}
		}()
		for range n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("fetch after %d records: %v", ledger.count(), err)
			}
			hdr := ""
			for _, h := range m.Headers {
				if h.Key == "n" {
					hdr = string(h.Value)
				}
			}
			ledger.add(int32(m.Partition), m.Offset, m.Key, m.Value, hdr)
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
	}
	half := otherClientRecords / 2
	read(half)
	read(otherClientRecords - half) // a new reader of the group resumes at the commits
	ledger.check(t, otherClientRecords)

	row := httpGroup(ctx, t, c.Nodes[0].URL(), "kafkago-g", topic)
	if row.TotalLag != 0 || row.PartitionCursors != 3 {
		t.Fatalf("HTTP view of the kafka-go group: %+v", row)
	}
}
