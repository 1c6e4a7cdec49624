package workload

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/bench/stats"
)

// ProduceLoad is one produce measurement against any Kafka broker: franz-go
// producers (acks=all, idempotent as franz-go defaults, lingering,
// uncompressed) write
// random records to Topic for Warmup, then for a measured window of
// Duration. The regression guard (bench/guard) runs it against two queen
// builds and an anchor broker.
type ProduceLoad struct {
	Seeds     []string
	Topic     string
	Producers int
	Size      int // record value bytes
	Linger    time.Duration
	// Rate is the records/s of all producers together, sent on a schedule
	// whatever the acknowledgements (open loop): a broker that falls behind
	// sees its latency grow, not its load shrink. 0 produces as fast as
	// Buffer records in flight per producer let (closed loop).
	Rate int
	// Buffer is the records each producer may hold unacknowledged. In the
	// open loop a record that finds the buffer full is dropped (counted,
	// not sent): 0 sizes it to 5 s of the producer's share of Rate.
	Buffer           int
	Warmup, Duration time.Duration
	// Window, when set, is called as the measured window opens (true) and
	// as it closes (false), from the goroutine that times it: for reading
	// the broker's CPU over the same window.
	Window func(open bool)
	// ClientOpts are added to each producer's options (a SASL login).
	ClientOpts []kgo.Opt
}

// ProduceResult is a finished produce measurement: Items are the records
// acknowledged in the window (by their acknowledgement's time), and the
// latencies those records' (handed to the client to acknowledged).
type ProduceResult struct {
	stats.Result
	// Sent are the records handed to the client in the window.
	Sent int64
	// Dropped are the open loop's records not sent for a full buffer, in
	// the window.
	Dropped int64
	// FirstErr is the first failed record's error, if any failed.
	FirstErr error
}

// Produce runs the load and returns what the window saw. A cancelled ctx
// ends it early with ctx's error.
func Produce(ctx context.Context, l ProduceLoad) (ProduceResult, error) {
	if l.Producers < 1 || l.Size < 1 || l.Rate < 0 || l.Duration <= 0 {
		return ProduceResult{}, fmt.Errorf("%w: producers and size at least 1, rate not negative, duration positive", ErrOptions)
	}
	buffer := l.Buffer
	if buffer <= 0 {
		buffer = 10000
		if l.Rate > 0 {
			buffer = max(buffer, 5*l.Rate/l.Producers)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		measuring                atomic.Bool
		sent, dropped, failed    atomic.Int64
		firstErr                 atomic.Value
		rec                      = stats.NewRecorder()
		wg                       sync.WaitGroup
		clients                  []*kgo.Client
		pool                     = make([]byte, 8<<20+l.Size)
		perProducer              = float64(l.Rate) / float64(l.Producers)
		size                     = l.Size
		warmup, duration, window = l.Warmup, l.Duration, l.Window
	)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	// Random bytes, a different slice for each record, as in Kafka.
	_, _ = rand.Read(pool)
	for range l.Producers {
		opts := append([]kgo.Opt{kgo.SeedBrokers(l.Seeds...), kgo.DefaultProduceTopic(l.Topic),
			kgo.ProducerLinger(l.Linger), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(buffer),
			// Uncompressed, as ../shared/perf's figures were taken: franz-go
			// compresses with snappy by default, and that load did not show
			// the produce path losing two fifths of its speed.
			kgo.ProducerBatchCompression(kgo.NoCompression())}, l.ClientOpts...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return ProduceResult{}, err
		}
		clients = append(clients, cl)
	}
	for p, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := p * 1000003
			send := func() {
				start := time.Now()
				off := (i * 7919 * size) % (len(pool) - size)
				i++
				promise := func(_ *kgo.Record, err error) {
					switch {
					case err == nil:
						if measuring.Load() {
							rec.Observe(time.Since(start), 1)
						}
					case ctx.Err() != nil: // stopping: records in flight fail
					case errors.Is(err, kgo.ErrMaxBuffered):
						if measuring.Load() {
							dropped.Add(1)
						}
					default:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
				if measuring.Load() {
					sent.Add(1)
				}
				// Each record owns its value, as an application's do: the
				// allocation is part of a real client's cost, and on a
				// small machine the broker shares the cores with it.
				r := &kgo.Record{Value: append(make([]byte, 0, size), pool[off:off+size]...)}
				if l.Rate > 0 {
					cl.TryProduce(ctx, r, promise)
				} else {
					cl.Produce(ctx, r, promise)
				}
			}
			if l.Rate == 0 {
				for ctx.Err() == nil {
					send()
				}
				return
			}
			// The open loop: every millisecond, send what the schedule
			// says is due by now.
			began, done := time.Now(), int64(0)
			for ctx.Err() == nil {
				due := int64(time.Since(began).Seconds() * perProducer)
				for ; done < due && ctx.Err() == nil; done++ {
					send()
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var elapsed time.Duration
	if sleep(warmup) {
		if window != nil {
			window(true)
		}
		measuring.Store(true)
		began := time.Now()
		ok := sleep(duration)
		measuring.Store(false)
		elapsed = time.Since(began)
		if window != nil {
			window(false)
		}
		if !ok {
			elapsed = 0
		}
	}
	err := ctx.Err()
	cancel()
	wg.Wait()
	if elapsed == 0 {
		return ProduceResult{}, err
	}
	res := ProduceResult{Result: rec.Result(elapsed), Sent: sent.Load(), Dropped: dropped.Load()}
	res.Errors = failed.Load()
	if e, ok := firstErr.Load().(error); ok {
		res.FirstErr = e
	}
	return res, nil
}

// CreateTopic creates topic with partitions partitions on the brokers at
// seeds, retrying until they answer (a node just started may not yet have
// a controller) or 30 s have passed.
func CreateTopic(seeds []string, topic string, partitions int32) error {
	return createTopic(seeds, topic, partitions)
}
