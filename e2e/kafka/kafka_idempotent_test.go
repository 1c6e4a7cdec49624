package kafka

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// An idempotent producer keeps writing through a SIGKILL of the leader: its
// retried batches are recognised by the replicated producer state on the
// new leader, so every partition holds exactly the produced sequence.
func TestKafkaIdempotentProducerAcrossLeaderSIGKILL(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 4*time.Minute)
	const partitions = 3
	admin := e2etest.KgoClient(t, c)
	e2etest.WaitBrokers(ctx, t, admin, 3)
	e2etest.CreateTopicOn(ctx, t, admin, "idem", partitions)
	leader := e2etest.GroupLeader(t, ctx, c, e2etest.FirstPartitionGroup(ctx, t, c.Nodes[0].URL(), "idem"))

	prod := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic("idem"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RetryTimeout(time.Minute))
	var (
		acked    atomic.Int64
		failures = make(chan error, 1)
		wg       sync.WaitGroup
		stop     atomic.Bool
		produced [partitions]int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			p := i % partitions
			r := &kgo.Record{Partition: int32(p), Value: []byte(strconv.Itoa(produced[p]))}
			produced[p]++
			wg.Add(1)
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					select {
					case failures <- err:
					default:
					}
					return
				}
				acked.Add(1)
			})
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond) // keep it a stream, not one burst
			}
		}
	}()
	waitAcked := func(n int64) {
		t.Helper()
		if err := harness.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
			select {
			case err := <-failures:
				return false, fmt.Errorf("a record failed: %w", err)
			default:
			}
			return acked.Load() >= n, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(1500)
	killed := c.Nodes[leader]
	killed.Kill()
	t.Logf("killed node %d (the leader) after %d acknowledged records", killed.ID, acked.Load())
	waitAcked(acked.Load() + 3000)
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-failures:
		t.Fatal("a record failed:", err)
	default:
	}
	total := 0
	for _, n := range produced {
		total += n
	}
	if acked.Load() != int64(total) {
		t.Fatalf("%d records acknowledged of %d produced", acked.Load(), total)
	}
	if err := c.Start(killed); err != nil {
		t.Fatal(err)
	}

	// Every partition holds 0, 1, 2, ... exactly: no loss, no duplicate, no
	// reordering.
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("idem"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := e2etest.ConsumeN(ctx, t, cons, total)
	next := [partitions]int{}
	for _, r := range got {
		v, err := strconv.Atoi(string(r.Value))
		if err != nil || v != next[r.Partition] {
			t.Fatalf("partition %d offset %d holds %q, want %d", r.Partition, r.Offset, r.Value, next[r.Partition])
		}
		next[r.Partition]++
	}
	for p, n := range next {
		if n != produced[p] {
			t.Fatalf("partition %d holds %d records, %d were produced", p, n, produced[p])
		}
	}
	t.Logf("%d records over %d partitions, each exactly once and in order", total, partitions)
}

// Metadata lists live brokers only, as Kafka does: a SIGKILLed node leaves
// the list within seconds and comes back once restarted. Clients depend on
// it: a transactional franz-go producer whose coordinator died retried the
// dead broker until its deadline while the node was still listed.
func TestKafkaMetadataListsLiveBrokersOnly(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	admin := e2etest.KgoClient(t, c, kgo.SeedBrokers(c.Nodes[0].KafkaAddr))
	e2etest.WaitBrokers(ctx, t, admin, 3)
	victim := c.Nodes[2]
	victim.Kill()
	listed := func() map[int32]bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
		if err != nil {
			return nil
		}
		ids := map[int32]bool{}
		for _, b := range resp.Brokers {
			ids[b.NodeID] = true
		}
		return ids
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		ids := listed()
		return ids != nil && len(ids) == 2 && !ids[int32(victim.ID)], nil
	}); err != nil {
		t.Fatalf("the killed node stayed in Metadata: %v", listed())
	}
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitBrokers(ctx, t, admin, 3)
}
