package workload

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/stats"
)

// KafkaOptions shape the Kafka benchmark.
type KafkaOptions struct {
	Nodes, Producers, Size, Partitions, Buffer int
	Brokers, Env                               string
	Linger, Duration, Warmup                   time.Duration
}

// Register adds the options as flags with their defaults.
func (o *KafkaOptions) Register(fs *flag.FlagSet) {
	fs.IntVar(&o.Nodes, "nodes", 1, "start this many nodes (1 or 3) unless -brokers is given")
	fs.StringVar(&o.Brokers, "brokers", "", "comma-separated Kafka addresses of running nodes")
	fs.IntVar(&o.Producers, "producers", 4, "producer clients")
	fs.IntVar(&o.Size, "size", 1024, "record value bytes")
	fs.IntVar(&o.Partitions, "partitions", 8, "partitions of the topic")
	fs.DurationVar(&o.Linger, "linger", 5*time.Millisecond, "producer linger")
	fs.DurationVar(&o.Duration, "duration", 15*time.Second, "how long to measure")
	fs.DurationVar(&o.Warmup, "warmup", 3*time.Second, "producing before measuring")
	fs.StringVar(&o.Env, "env", "", "extra node settings, K=V,K=V (started nodes only)")
	fs.IntVar(&o.Buffer, "buffer", 10000, "records each producer may hold unacknowledged")
}

// Kafka measures the Kafka door: franz-go producers write records (acks=all,
// idempotent, lingering) to a topic while a franz-go consumer reads them,
// for a fixed time. It prints records/s and MB/s produced and consumed,
// and the produce latency (record handed to the client to acknowledged)
// percentiles. Producers write as fast as they are let, up to Buffer
// records each in flight, so that latency includes the wait in the
// client's buffer: a lower Buffer shows the broker's part.
func Kafka(o KafkaOptions, start node.Starter, w io.Writer) error {
	if o.Size < 1 || o.Producers < 1 || o.Partitions < 1 {
		return fmt.Errorf("%w: size, producers and partitions must be at least 1", ErrOptions)
	}
	seeds := strings.Split(o.Brokers, ",")
	if o.Brokers == "" {
		env := map[string]string{}
		for _, kv := range strings.Split(o.Env, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		c, stop, err := start(o.Nodes, env)
		if err != nil {
			return err
		}
		defer stop()
		seeds = nil
		for _, n := range c.Nodes {
			seeds = append(seeds, n.KafkaAddr)
		}
	}
	topic := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := createTopic(seeds, topic, int32(o.Partitions)); err != nil {
		return err
	}
	prod, cons, err := kafkaRun(w, seeds, topic, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "kafka nodes=%d producers=%d size=%dB partitions=%d linger=%s acks=all duration=%s\n",
		o.Nodes, o.Producers, o.Size, o.Partitions, o.Linger, o.Duration)
	mb := func(r stats.Result) float64 { return float64(r.Items) * float64(o.Size) / r.Elapsed.Seconds() / 1e6 }
	fmt.Fprintf(w, "  produced: %8.0f records/s  %6.1f MB/s  errors %d\n", float64(prod.Items)/prod.Elapsed.Seconds(), mb(prod), prod.Errors)
	fmt.Fprintf(w, "  produce latency (record handed to the client to acknowledged): p50 %v  p99 %v  max %v\n",
		prod.P50.Round(time.Millisecond), prod.P99.Round(time.Millisecond), prod.Max.Round(time.Millisecond))
	fmt.Fprintf(w, "  consumed: %8.0f records/s  %6.1f MB/s\n", float64(cons.Items)/cons.Elapsed.Seconds(), mb(cons))
	return nil
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

// kafkaRun produces and consumes concurrently: warmup, then a measured window.
func kafkaRun(w io.Writer, seeds []string, topic string, o KafkaOptions) (stats.Result, stats.Result, error) {
	producers, size, buffer, linger, warmup, duration := o.Producers, o.Size, o.Buffer, o.Linger, o.Warmup, o.Duration
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
	elapsed := measure(&measuring, warmup, duration)
	cancel()
	wg.Wait()
	p := prodRec.Result(elapsed)
	p.Errors = failed.Load()
	c := stats.Result{Elapsed: elapsed, Items: consumed.Load()}
	if e, ok := firstErr.Load().(error); ok {
		fmt.Fprintln(w, "first produce error:", e)
	}
	return p, c, nil
}
