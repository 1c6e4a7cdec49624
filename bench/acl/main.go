// Command acl measures what ACLs cost a producer (issue 36): two single
// nodes built from this checkout, alike but for QUEEN_ACLS, both with
// SASL/PLAIN; on the ACL node, -acls prefixed bindings for other principals
// and one prefixed WRITE for the producer's. franz-go producers (the
// bench/guard load) write to each node in turn, -rounds interleaved rounds
// (the order alternating), and it prints each round and the medians: the
// records/s of producers writing as fast as they are let, and the node's
// CPU µs per record at a fixed -cpu-rate (less moved by a busy machine).
//
//	go run ./bench/acl
//	go run ./bench/acl -rounds 7 -duration 10s -acls 1000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/proc"
	"github.com/queen-mq/queen/bench/workload"
	"github.com/queen-mq/queen/e2e/harness"
)

func main() {
	var (
		rounds     = flag.Int("rounds", 5, "interleaved rounds (each measures both nodes)")
		duration   = flag.Duration("duration", 10*time.Second, "each measured window")
		warmup     = flag.Duration("warmup", 2*time.Second, "producing before each window")
		acls       = flag.Int("acls", 1000, "prefixed bindings on the ACL node besides the producer's")
		producers  = flag.Int("producers", 4, "producer clients")
		size       = flag.Int("size", 1024, "record value bytes")
		partitions = flag.Int("partitions", 8, "partitions of the topic")
		cpuRate    = flag.Int("cpu-rate", 30000, "records/s sent for the CPU per record measurement (0: none)")
		control    = flag.Bool("control", false, "A/A control: the second node without ACLs too (what the two nodes differ by alone)")
	)
	flag.Parse()
	if *control {
		*acls = -1
	}
	if err := run(*rounds, *duration, *warmup, *acls, *producers, *size, int32(*partitions), *cpuRate); err != nil {
		fmt.Fprintln(os.Stderr, "acl bench:", err)
		os.Exit(1)
	}
}

const topic = "bench.acl"

func login(user string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: user + "pw"}.AsMechanism())
}

func run(rounds int, duration, warmup time.Duration, acls, producers, size int, partitions int32, cpuRate int) error {
	dir, err := os.MkdirTemp("", "queen-acl-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := harness.Build(dir)
	if err != nil {
		return err
	}
	start := node.Binary(bin)
	// The cleaner trims the topic to retention.bytes every second: rounds
	// of full-speed producing would otherwise fill the disk (tens of GB).
	env := map[string]string{"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "admin:adminpw,prod:prodpw",
		"QUEEN_KAFKA_LOG_CLEANER_INTERVAL_MS": "1000"}
	off, stopOff, err := start(1, env)
	if err != nil {
		return err
	}
	defer stopOff()
	onEnv := map[string]string{"QUEEN_ACLS": "true", "QUEEN_ACL_SUPER_USERS": "User:admin"}
	second := fmt.Sprint(acls, " prefixed")
	if acls < 0 {
		onEnv, second = map[string]string{}, "control"
	}
	for k, v := range env {
		onEnv[k] = v
	}
	on, stopOn, err := start(1, onEnv)
	if err != nil {
		return err
	}
	defer stopOn()
	seeds := map[string][]string{"none": {off.Nodes[0].KafkaAddr}, second: {on.Nodes[0].KafkaAddr}}
	pids := map[string]int{"none": off.Nodes[0].Pid(), second: on.Nodes[0].Pid()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for name, s := range seeds {
		if err := setup(ctx, s, name != "none" && acls >= 0, acls, partitions); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	names := []string{"none", second}
	got, cpu := map[string][]float64{}, map[string][]float64{}
	for r := range rounds {
		order := names
		if r%2 == 1 {
			order = []string{names[1], names[0]}
		}
		for _, name := range order {
			load := workload.ProduceLoad{Seeds: seeds[name], Topic: topic, Producers: producers, Size: size,
				Linger: 5 * time.Millisecond, Buffer: 50000, Warmup: warmup, Duration: duration, ClientOpts: []kgo.Opt{login("prod")}}
			res, err := workload.Produce(ctx, load)
			if err != nil {
				return err
			}
			if res.FirstErr != nil {
				return fmt.Errorf("%s: a record failed: %w", name, res.FirstErr)
			}
			rate := float64(res.Items) / duration.Seconds()
			got[name] = append(got[name], rate)
			line := fmt.Sprintf("round %d  %-14s %10.0f records/s", r+1, name, rate)
			if cpuRate > 0 {
				us, err := cpuPerRecord(ctx, load, cpuRate, pids[name])
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				cpu[name] = append(cpu[name], us)
				line += fmt.Sprintf("  %6.2f CPU µs/record at %d/s", us, cpuRate)
			}
			fmt.Println(line)
		}
	}
	med := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	a, b := med(got[names[0]]), med(got[names[1]])
	fmt.Printf("median  %-14s %10.0f records/s\nmedian  %-14s %10.0f records/s  (%+.1f%%)\n", names[0], a, names[1], b, 100*(b-a)/a)
	if cpuRate > 0 {
		a, b := med(cpu[names[0]]), med(cpu[names[1]])
		fmt.Printf("median  %-14s %10.2f CPU µs/record\nmedian  %-14s %10.2f CPU µs/record  (%+.1f%%)\n", names[0], a, names[1], b, 100*(b-a)/a)
	}
	return nil
}

// cpuPerRecord is the node's CPU time per record acknowledged while
// producers send rate records/s (open loop).
func cpuPerRecord(ctx context.Context, load workload.ProduceLoad, rate, pid int) (float64, error) {
	var c0, c1 time.Duration
	var cerr error
	load.Rate, load.Buffer = rate, 0
	load.Window = func(open bool) {
		c, err := proc.CPUTime(pid)
		cerr = errors.Join(cerr, err)
		if open {
			c0 = c
		} else {
			c1 = c
		}
	}
	res, err := workload.Produce(ctx, load)
	if err = errors.Join(err, cerr, res.FirstErr); err != nil {
		return 0, err
	}
	if res.Items == 0 {
		return 0, errors.New("no record acknowledged")
	}
	return (c1 - c0).Seconds() / float64(res.Items) * 1e6, nil
}

// setup creates the topic as admin and, on the ACL node, the bindings:
// acls prefixed ones for other principals and the producer's WRITE on
// bench.* (which also lets its idempotent producer in, Kafka 3.x).
func setup(ctx context.Context, seeds []string, withACLs bool, acls int, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), login("admin"))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	retention := "67108864" // per partition
	res, err := adm.CreateTopics(ctx, partitions, 1, map[string]*string{"retention.bytes": &retention}, topic)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return err
	}
	if !withACLs {
		return nil
	}
	for i := 0; i < acls; i += 500 {
		b := kadm.NewACLs().ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite)
		var topics []string
		for j := i; j < min(i+500, acls); j++ {
			// Prefixes of many lengths, some shorter than the
			// producer's topic, so a decision probes several.
			if j%2 == 0 {
				topics = append(topics, fmt.Sprintf("t%d.", j))
			} else {
				topics = append(topics, fmt.Sprintf("team%d.svc%d.", j%37, j))
			}
		}
		b.Topics(topics...).Allow(fmt.Sprintf("User:app%d", i/500))
		if err := created(adm.CreateACLs(ctx, b)); err != nil {
			return err
		}
	}
	return created(adm.CreateACLs(ctx, kadm.NewACLs().Topics("bench.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:prod").Operations(kadm.OpWrite)))
}

func created(res kadm.CreateACLsResults, err error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return errors.Join(r.Err, errors.New(r.ErrMessage))
		}
	}
	return nil
}
