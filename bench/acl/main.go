// Command acl measures what ACLs cost a producer (issue 36): two single
// nodes built from this checkout, alike but for QUEEN_ACLS, both with
// SASL/PLAIN; on the ACL node, -acls prefixed bindings for other principals
// and one prefixed WRITE for the producer's. franz-go producers (the
// bench/guard load) write to each node in turn, -rounds interleaved rounds
// (the order alternating), and it prints each round and the medians.
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
		control    = flag.Bool("control", false, "A/A control: the second node without ACLs too (what the two nodes differ by alone)")
	)
	flag.Parse()
	if *control {
		*acls = -1
	}
	if err := run(*rounds, *duration, *warmup, *acls, *producers, *size, int32(*partitions)); err != nil {
		fmt.Fprintln(os.Stderr, "acl bench:", err)
		os.Exit(1)
	}
}

const topic = "bench.acl"

func login(user string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: user + "pw"}.AsMechanism())
}

func run(rounds int, duration, warmup time.Duration, acls, producers, size int, partitions int32) error {
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
	env := map[string]string{"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "admin:adminpw,prod:prodpw"}
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for name, s := range seeds {
		if err := setup(ctx, s, name != "none" && acls >= 0, acls, partitions); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	names := []string{"none", second}
	got := map[string][]float64{}
	for r := range rounds {
		order := names
		if r%2 == 1 {
			order = []string{names[1], names[0]}
		}
		for _, name := range order {
			res, err := workload.Produce(ctx, workload.ProduceLoad{Seeds: seeds[name], Topic: topic, Producers: producers, Size: size,
				Linger: 5 * time.Millisecond, Buffer: 50000, Warmup: warmup, Duration: duration, ClientOpts: []kgo.Opt{login("prod")}})
			if err != nil {
				return err
			}
			if res.FirstErr != nil {
				return fmt.Errorf("%s: a record failed: %w", name, res.FirstErr)
			}
			rate := float64(res.Items) / duration.Seconds()
			got[name] = append(got[name], rate)
			fmt.Printf("round %d  %-14s %10.0f records/s\n", r+1, name, rate)
		}
	}
	med := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	a, b := med(got[names[0]]), med(got[names[1]])
	fmt.Printf("median  %-14s %10.0f records/s\nmedian  %-14s %10.0f records/s  (%+.1f%%)\n", names[0], a, names[1], b, 100*(b-a)/a)
	return nil
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
	res, err := adm.CreateTopics(ctx, partitions, 1, nil, topic)
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
