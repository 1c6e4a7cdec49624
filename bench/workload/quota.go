package workload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/bench/node"
)

// QuotaOptions shape the client-quota benchmark.
type QuotaOptions struct {
	Rate, Size, Partitions int
	Brokers, Env, ClientID string
	Duration, Warmup       time.Duration
}

// Register adds the options as flags with their defaults.
func (o *QuotaOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Brokers, "brokers", "", "comma-separated Kafka addresses of running nodes (default: start one)")
	fs.IntVar(&o.Rate, "rate", 1_000_000, "producer_byte_rate set for the client id, bytes/s")
	fs.IntVar(&o.Size, "size", 10_000, "record value bytes")
	fs.IntVar(&o.Partitions, "partitions", 1, "partitions of the topic")
	fs.StringVar(&o.ClientID, "client-id", "bench-quota", "the producer's client id, the quota's entity")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "how long to measure")
	fs.DurationVar(&o.Warmup, "warmup", 3*time.Second, "producing before measuring (spends the bucket's burst)")
	fs.StringVar(&o.Env, "env", "", "extra node settings, K=V,K=V (started nodes only)")
}

// quotaSeen is what the producer's hooks saw: throttles, the longest,
// and the batches' bytes as sent once measuring.
type quotaSeen struct {
	measuring          atomic.Bool
	throttles, maxMs   atomic.Int64
	wireBytes, records atomic.Int64
}

func (s *quotaSeen) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d <= 0 {
		return
	}
	s.throttles.Add(1)
	for ms := d.Milliseconds(); ; {
		cur := s.maxMs.Load()
		if ms <= cur || s.maxMs.CompareAndSwap(cur, ms) {
			break
		}
	}
}

func (s *quotaSeen) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	if s.measuring.Load() {
		s.wireBytes.Add(int64(m.CompressedBytes))
		s.records.Add(int64(m.NumRecords))
	}
}

// Quota measures a producer held to producer_byte_rate: it sets the rate
// for a client id with kadm, then one franz-go producer with that id
// (acks=all, uncompressed: the quota meters the batches' bytes as sent)
// writes as fast as the client lets it, for Duration after Warmup. It
// prints the bytes acknowledged per second (the batches' bytes, what the
// broker meters, and the record values'), the throttles the client's
// OnBrokerThrottle hook saw and the longest, and the client's errors.
func Quota(o QuotaOptions, start node.Starter, w io.Writer) error {
	if o.Rate < 1 || o.Size < 1 || o.Partitions < 1 || o.Duration <= 0 {
		return fmt.Errorf("%w: rate, size, partitions and duration must be positive", ErrOptions)
	}
	seeds := strings.Split(o.Brokers, ",")
	if o.Brokers == "" {
		env := map[string]string{}
		for _, kv := range strings.Split(o.Env, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		c, stop, err := start(1, env)
		if err != nil {
			return err
		}
		defer stop()
		seeds = []string{c.Nodes[0].KafkaAddr}
	}
	topic := fmt.Sprintf("bench-quota-%d", time.Now().UnixNano())
	if err := createTopic(seeds, topic, int32(o.Partitions)); err != nil {
		return err
	}
	if err := setByteRate(seeds, o.ClientID, float64(o.Rate)); err != nil {
		return err
	}
	seen := &quotaSeen{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(o.ClientID), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.MaxBufferedRecords(4096), kgo.WithHooks(seen))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked, failed atomic.Int64
	var firstErr atomic.Value
	value := make([]byte, o.Size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				switch {
				case err == nil:
					if seen.measuring.Load() {
						acked.Add(1)
					}
				case ctx.Err() == nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			})
		}
	}()
	time.Sleep(o.Warmup)
	throttlesBefore := seen.throttles.Load()
	seen.measuring.Store(true)
	began := time.Now()
	time.Sleep(o.Duration)
	seen.measuring.Store(false)
	elapsed := time.Since(began)
	cancel()
	<-done
	secs := elapsed.Seconds()
	fmt.Fprintf(w, "quota producer_byte_rate=%d B/s client-id=%s size=%dB partitions=%d acks=all uncompressed duration=%s\n",
		o.Rate, o.ClientID, o.Size, o.Partitions, elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  measured: %.3f MB/s of batches as sent (%.3f MB/s of record values, %d records acknowledged)\n",
		float64(seen.wireBytes.Load())/secs/1e6, float64(acked.Load())*float64(o.Size)/secs/1e6, acked.Load())
	fmt.Fprintf(w, "  quota:    %.3f MB/s; measured/quota %.3f\n", float64(o.Rate)/1e6, float64(seen.wireBytes.Load())/secs/float64(o.Rate))
	fmt.Fprintf(w, "  throttles seen by the client (OnBrokerThrottle): %d while measuring, %d in all, longest %d ms\n",
		seen.throttles.Load()-throttlesBefore, seen.throttles.Load(), seen.maxMs.Load())
	fmt.Fprintf(w, "  client errors: %d\n", failed.Load())
	if e, ok := firstErr.Load().(error); ok {
		fmt.Fprintln(w, "  first error:", e)
	}
	return nil
}

// setByteRate sets producer_byte_rate for a client id.
func setByteRate(seeds []string, clientID string, rate float64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &clientID}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
	}})
	if err == nil && len(res) == 1 && res[0].Err != nil {
		err = fmt.Errorf("%w: %s", res[0].Err, res[0].ErrMessage)
	}
	if err == nil && len(res) != 1 {
		err = errors.New("AlterClientQuotas answered no entity")
	}
	if err != nil {
		return fmt.Errorf("set producer_byte_rate: %w", err)
	}
	return nil
}
