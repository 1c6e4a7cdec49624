// Command guard compares two builds of queen on the Kafka produce path,
// in interleaved rounds, against an anchor broker, and prints ratios: run
// it before and after a change to a hot path.
//
// A is the base revision (-base, default HEAD), built in a temporary git
// worktree; B is the working tree as it is, uncommitted changes included;
// -a and -b take two prebuilt binaries instead. K, the anchor, is franz-go's
// kfake persisting every batch with fsync, in a process of its own: the
// same load on a broker that does not change with the code shows how much
// the machine itself moved.
//
// Each round measures, for A, B and K in turn (the order rotating from
// round to round), each against a fresh broker (one queen node with a
// temp data dir on free 127.0.0.1 ports, or a fresh kfake):
//
//   - throughput: records/s acknowledged, producers as fast as they may;
//   - cpu: the broker process's CPU time (utime+stime, /proc/<pid>/stat)
//     per record acknowledged, at a fixed rate sent on a schedule;
//   - latency: p50 and p99 from a record handed to the client to its
//     acknowledgement, at a lower fixed rate.
//
// The load is franz-go producers writing 1 KiB random records, uncompressed, to an
// 8-partition topic, acks=all, idempotent, 5 ms linger (workload.Produce).
// It prints each run's figure, the median per build, the median of the
// rounds' B/A ratios and each build's median ratio to K; -json prints one
// JSON line instead.
//
//	go run ./bench/guard                     # HEAD against the working tree
//	go run ./bench/guard -base HEAD~3 -rounds 7
//	go run ./bench/guard -a ./queen-old -b ./queen-new -json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/queen-mq/queen/bench/proc"
	"github.com/queen-mq/queen/bench/workload"
)

// options are the guard's flags.
type options struct {
	base, binA, binB, env, metrics  string
	rounds, producers, size, buffer int
	partitions, cpuRate, latRate    int
	duration, warmup, linger        time.Duration
	json                            bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.base, "base", "HEAD", "A: the revision to build in a temporary worktree and compare the working tree (B) against")
	fs.StringVar(&o.binA, "a", "", "A: a prebuilt queen binary instead of building -base (needs -b)")
	fs.StringVar(&o.binB, "b", "", "B: a prebuilt queen binary instead of building the working tree (needs -a)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of A, B, K (each round measures every metric on each)")
	fs.StringVar(&o.metrics, "metrics", "throughput,cpu,latency", "the measurements to make, comma-separated")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "each measured window")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "producing before each window")
	fs.IntVar(&o.cpuRate, "cpu-rate", 50000, "records/s sent for the CPU per record measurement")
	fs.IntVar(&o.latRate, "latency-rate", 20000, "records/s sent for the latency measurement")
	fs.IntVar(&o.producers, "producers", 4, "producer clients")
	fs.IntVar(&o.size, "size", 1024, "record value bytes")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of the topic")
	fs.DurationVar(&o.linger, "linger", 5*time.Millisecond, "producer linger")
	fs.IntVar(&o.buffer, "buffer", 50000, "throughput: records each producer may hold unacknowledged (franz-go's default, as ../shared/perf loads)")
	fs.StringVar(&o.env, "env", "", "extra queen settings for both builds, K=V,K=V")
	fs.BoolVar(&o.json, "json", false, "print one JSON line instead of the tables")
}

// metric is one of the three measurements.
type metric struct {
	Key, Title, Unit string
	// Rate is the fixed rate (records/s), 0 for as fast as possible.
	Rate int
	// HigherBetter says which way a ratio above 1 points.
	HigherBetter bool
	// value is the run's figure in Unit.
	value func(run) float64
}

func metricsOf(o options) ([]metric, error) {
	all := map[string]metric{
		"throughput": {Key: "throughput", Unit: "records/s", HigherBetter: true,
			Title: "throughput: records/s acknowledged, producing as fast as allowed",
			value: func(r run) float64 { return r.AckedPerSec }},
		"cpu": {Key: "cpu", Unit: "µs/record", Rate: o.cpuRate,
			Title: fmt.Sprintf("cpu: broker CPU µs per record acknowledged, %d records/s sent", o.cpuRate),
			value: func(r run) float64 { return r.CPUPerRecordUs }},
		"latency": {Key: "latency", Unit: "ms p99", Rate: o.latRate,
			Title: fmt.Sprintf("latency: p99 ms (p50 ms) handed to the client to acknowledged, %d records/s sent", o.latRate),
			value: func(r run) float64 { return r.P99Ms }},
	}
	var ms []metric
	for _, k := range strings.Split(o.metrics, ",") {
		m, ok := all[strings.TrimSpace(k)]
		if !ok {
			return nil, fmt.Errorf("%w: -metrics: %q is none of throughput, cpu, latency", workload.ErrOptions, k)
		}
		if m.Key != "throughput" && m.Rate < 1 {
			return nil, fmt.Errorf("%w: -%s-rate must be at least 1", workload.ErrOptions, m.Key)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func main() {
	var o options
	var serve string
	o.register(flag.CommandLine)
	flag.StringVar(&serve, kfakeServeFlag, "", "(internal) run the anchor broker with its data in this directory")
	flag.Parse()
	if serve != "" {
		if err := serveKfake(serve, o.partitions); err != nil {
			fmt.Fprintln(os.Stderr, "kfake:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := guard(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "guard:", err)
		switch {
		case errors.Is(err, workload.ErrOptions):
			os.Exit(2)
		case ctx.Err() != nil:
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// progress tells the person waiting where the guard is, on stderr (stdout
// is the report).
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "guard: "+format+"\n", args...)
}

func guard(ctx context.Context, o options) error {
	ms, err := metricsOf(o)
	if err != nil {
		return err
	}
	if o.rounds < 1 || o.producers < 1 || o.size < 1 || o.partitions < 1 || o.duration <= 0 || o.warmup < 0 {
		return fmt.Errorf("%w: rounds, producers, size and partitions at least 1, duration positive", workload.ErrOptions)
	}
	if (o.binA == "") != (o.binB == "") {
		return fmt.Errorf("%w: -a and -b go together", workload.ErrOptions)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(o.env, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	tmp, err := os.MkdirTemp("", "queen-guard")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var a, b build
	if o.binA != "" {
		a = build{Bin: o.binA, Label: o.binA}
		b = build{Bin: o.binB, Label: o.binB}
	} else {
		root, err := moduleRoot(ctx)
		if err != nil {
			return err
		}
		if a, b, err = buildBoth(ctx, root, o.base, tmp); err != nil {
			return err
		}
	}

	rep := report{
		A: a, B: b,
		K:      "kfake " + kfakeVersion() + ", one broker, DataDir + SyncWrites (fsync per batch)",
		Rounds: o.rounds, CPUs: runtime.NumCPU(),
		Load: fmt.Sprintf("%d producers, %d B records uncompressed, acks=all, idempotent, linger %s, %d partitions; %s warm-up, %s window; a fresh broker per run",
			o.producers, o.size, o.linger, o.partitions, o.warmup, o.duration),
		Started: time.Now().UTC().Format(time.RFC3339),
	}
	targets := []string{"A", "B", "K"}
	for r := range o.rounds {
		order := append(append([]string{}, targets[r%3:]...), targets[:r%3]...)
		for _, m := range ms {
			for _, t := range order {
				res, err := measure(ctx, o, m, t, a, b, env)
				if err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", r+1, m.Key, t, err)
				}
				res.Round, res.Target, res.Metric = r+1, t, m.Key
				res.Value = m.value(res)
				progress("round %d/%d %-10s %s %s", r+1, o.rounds, m.Key, t, res.summary(m))
				rep.Runs = append(rep.Runs, res)
			}
		}
	}
	rep.summarise(ms)
	if o.json {
		return rep.writeJSON(os.Stdout)
	}
	rep.writeTables(os.Stdout, ms)
	return nil
}

// measure makes one run of metric m on target t (A, B or K), against a
// broker started for it and stopped after.
func measure(ctx context.Context, o options, m metric, t string, a, b build, env map[string]string) (run, error) {
	if ctx.Err() != nil {
		return run{}, ctx.Err()
	}
	var br *broker
	var err error
	switch t {
	case "A":
		br, err = startQueen(a.Bin, env)
	case "B":
		br, err = startQueen(b.Bin, env)
	default:
		br, err = startKfake(o.partitions)
	}
	if err != nil {
		return run{}, fmt.Errorf("start: %w", err)
	}
	defer br.stop()
	const topic = "guard"
	if err := workload.CreateTopic(br.seeds, topic, int32(o.partitions)); err != nil {
		return run{}, fmt.Errorf("%w\n%s", err, br.logTail())
	}
	var cpu0, cpu1 time.Duration
	var cpuErr error
	load := workload.ProduceLoad{
		Seeds: br.seeds, Topic: topic, Producers: o.producers, Size: o.size, Linger: o.linger,
		Rate: m.Rate, Warmup: o.warmup, Duration: o.duration,
		Window: func(open bool) {
			c, err := proc.CPUTime(br.pid)
			cpuErr = errors.Join(cpuErr, err)
			if open {
				cpu0 = c
			} else {
				cpu1 = c
			}
		},
	}
	if m.Rate == 0 {
		load.Buffer = o.buffer
	}
	res, err := workload.Produce(ctx, load)
	if err != nil {
		return run{}, err
	}
	if !br.alive() {
		return run{}, fmt.Errorf("the broker exited during the run:\n%s", br.logTail())
	}
	if cpuErr != nil {
		return run{}, fmt.Errorf("reading the broker's CPU time: %w", cpuErr)
	}
	if res.Items == 0 {
		return run{}, fmt.Errorf("no record acknowledged in the window (first error: %v):\n%s", res.FirstErr, br.logTail())
	}
	secs := res.Elapsed.Seconds()
	cpu := cpu1 - cpu0
	out := run{
		AckedPerSec:    float64(res.Items) / secs,
		SentPerSec:     float64(res.Sent) / secs,
		P50Ms:          ms(res.P50),
		P99Ms:          ms(res.P99),
		MaxMs:          ms(res.Max),
		CPUSeconds:     cpu.Seconds(),
		CPUPerRecordUs: cpu.Seconds() / float64(res.Items) * 1e6,
		Dropped:        res.Dropped,
		Errors:         res.Errors,
	}
	if res.FirstErr != nil {
		out.FirstErr = res.FirstErr.Error()
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
