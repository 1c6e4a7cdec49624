// Command kafka measures the Kafka door: franz-go producers write 1 KiB
// records (acks=all, idempotent, 5 ms linger) to an 8-partition topic while
// a franz-go consumer reads them, for a fixed time. It prints records/s and
// MB/s produced and consumed, and the produce latency (record handed to the
// client to acknowledged) percentiles. Producers write as fast as they are
// let, up to -buffer records each in flight, so that latency includes the
// wait in the client's buffer: lower -buffer shows the broker's part. It starts its own node or 3-node
// cluster (built from this checkout, temp data dirs, free ports) unless
// -brokers points at one.
//
//	go run ./bench/kafka -nodes 1
//	go run ./bench/kafka -nodes 3 -producers 4
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/bench/internal/node"
	"github.com/queen-mq/queen/bench/internal/stats"
)

func main() {
	var (
		nodes      = flag.Int("nodes", 1, "start this many nodes (1 or 3) unless -brokers is given")
		brokers    = flag.String("brokers", "", "comma-separated Kafka addresses of running nodes")
		producers  = flag.Int("producers", 4, "producer clients")
		size       = flag.Int("size", 1024, "record value bytes")
		partitions = flag.Int("partitions", 8, "partitions of the topic")
		linger     = flag.Duration("linger", 5*time.Millisecond, "producer linger")
		duration   = flag.Duration("duration", 15*time.Second, "how long to measure")
		warmup     = flag.Duration("warmup", 3*time.Second, "producing before measuring")
		env        = flag.String("env", "", "extra node settings, K=V,K=V (started nodes only)")
		buffer     = flag.Int("buffer", 10000, "records each producer may hold unacknowledged")
	)
	flag.Parse()
	seeds := strings.Split(*brokers, ",")
	if *brokers == "" {
		stop, addrs, err := startNodes(*nodes, *env)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer stop()
		seeds = addrs
	}
	topic := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := createTopic(seeds, topic, int32(*partitions)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	prod, cons, err := run(seeds, topic, *producers, *size, *buffer, *linger, *warmup, *duration)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("kafka nodes=%d producers=%d size=%dB partitions=%d linger=%s acks=all duration=%s\n",
		*nodes, *producers, *size, *partitions, *linger, *duration)
	mb := func(r stats.Result) float64 { return float64(r.Items) * float64(*size) / r.Elapsed.Seconds() / 1e6 }
	fmt.Printf("  produced: %8.0f records/s  %6.1f MB/s  errors %d\n", float64(prod.Items)/prod.Elapsed.Seconds(), mb(prod), prod.Errors)
	fmt.Printf("  produce latency (record handed to the client to acknowledged): p50 %v  p99 %v  max %v\n",
		prod.P50.Round(time.Millisecond), prod.P99.Round(time.Millisecond), prod.Max.Round(time.Millisecond))
	fmt.Printf("  consumed: %8.0f records/s  %6.1f MB/s\n", float64(cons.Items)/cons.Elapsed.Seconds(), mb(cons))
}

// startNodes starts one node or a 3-node cluster and returns the Kafka
// addresses of every node.
func startNodes(n int, extra string) (func(), []string, error) {
	env := map[string]string{}
	for _, kv := range strings.Split(extra, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	c, stop, err := node.StartCluster(n, env)
	if err != nil {
		return nil, nil, err
	}
	var addrs []string
	for _, node := range c.Nodes {
		addrs = append(addrs, node.KafkaAddr)
	}
	return stop, addrs, nil
}

func createTopic(seeds []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: partitions, ReplicationFactor: -1}}
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("create topic: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run produces and consumes concurrently: warmup, then a measured window.
func run(seeds []string, topic string, producers, size, buffer int, linger, warmup, duration time.Duration) (stats.Result, stats.Result, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		measuring atomic.Bool
		failed    atomic.Int64
		prodRec   = stats.NewRecorder()
		consumed  atomic.Int64
		wg        sync.WaitGroup
		firstErr  atomic.Value
	)
	// Random bytes, a different slice for each record: what the store's
	// block compression meets is the worst case, not the best.
	pool := make([]byte, 8<<20+size)
	_, _ = rand.Read(pool)
	for p := 0; p < producers; p++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(linger),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(buffer))
		if err != nil {
			return stats.Result{}, stats.Result{}, err
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				start := time.Now()
				off := (i * 7919 * size) % (len(pool) - size)
				cl.Produce(ctx, &kgo.Record{Value: pool[off : off+size]}, func(_ *kgo.Record, err error) {
					if err != nil {
						if ctx.Err() == nil {
							failed.Add(1)
							firstErr.CompareAndSwap(nil, err)
						}
						return
					}
					if measuring.Load() {
						prodRec.Observe(time.Since(start), 1)
					}
				})
			}
		}()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return stats.Result{}, stats.Result{}, err
	}
	defer cons.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			if measuring.Load() {
				consumed.Add(int64(fs.NumRecords()))
			}
		}
	}()
	time.Sleep(warmup)
	measuring.Store(true)
	began := time.Now()
	time.Sleep(duration)
	measuring.Store(false)
	elapsed := time.Since(began)
	cancel()
	wg.Wait()
	p := prodRec.Result(elapsed)
	p.Errors = failed.Load()
	c := stats.Result{Elapsed: elapsed, Items: consumed.Load()}
	if e, ok := firstErr.Load().(error); ok {
		fmt.Fprintln(os.Stderr, "first produce error:", e)
	}
	return p, c, nil
}
