package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Topic commands, over the Kafka port with franz-go's admin client: what
// kafka-topics.sh does, against the same listener Kafka clients use.

type kafkaFlags struct {
	brokers string
	user    string
	tls     bool
	json    bool
	timeout time.Duration
}

func newTopicsCommand() *cobra.Command {
	kf := &kafkaFlags{}
	cmd := &cobra.Command{Use: "topics", Short: "List, create, describe and delete topics (Kafka port)"}
	pf := cmd.PersistentFlags()
	pf.StringVar(&kf.brokers, "brokers", envOr("QUEEN_BROKERS", "127.0.0.1:9092"), "comma-separated Kafka addresses (env QUEEN_BROKERS)")
	pf.StringVar(&kf.user, "sasl-user", envOr("QUEEN_KAFKA_USER", ""), "SASL/PLAIN user (env QUEEN_KAFKA_USER); the password comes from QUEEN_KAFKA_PASSWORD")
	pf.BoolVar(&kf.tls, "tls", false, "connect with TLS (system roots)")
	pf.BoolVar(&kf.json, "json", false, "print JSON instead of a table")
	pf.DurationVar(&kf.timeout, "timeout", 15*time.Second, "give up after this long")
	cmd.AddCommand(topicsList(kf), topicsCreate(kf), topicsDescribe(kf), topicsDelete(kf))
	return cmd
}

// run makes a topic subcommand's RunE: fn gets an admin client of
// --brokers and a context bounded by --timeout, both closed after it.
func (kf *kafkaFlags) run(fn func(ctx context.Context, adm *kadm.Client, out io.Writer, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		var seeds []string
		for _, b := range strings.Split(kf.brokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				seeds = append(seeds, b)
			}
		}
		if len(seeds) == 0 {
			return usageError("--brokers names no address")
		}
		opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
		if kf.tls {
			opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		}
		if kf.user != "" {
			opts = append(opts, kgo.SASL(plain.Auth{User: kf.user, Pass: envOr("QUEEN_KAFKA_PASSWORD", "")}.AsMechanism()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return usageError("kafka client: %v", err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), kf.timeout)
		defer cancel()
		return fn(ctx, kadm.NewClient(cl), cmd.OutOrStdout(), args)
	}
}

// kafkaError classifies an admin error: a Kafka error code is the broker
// refusing (exit 2), anything else is the broker failing or unreachable.
func kafkaError(what string, err error, brokers string) error {
	var ke *kerr.Error
	var ae *kadm.AuthError
	if errors.As(err, &ke) || errors.As(err, &ae) {
		return refusedError("refused: %s: %v", what, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return serverError("%s: no answer from %s in time (is the Kafka port reachable?)", what, brokers)
	}
	return serverError("%s: %v", what, err)
}

// listOffsets lists topic's offsets with list, again while a partition
// answers a retriable error (a leader just elected answers
// OFFSET_NOT_AVAILABLE until it has applied its predecessor's entries),
// until ctx ends: Kafka's admin client retries those too.
func listOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string) (kadm.ListedOffsets, error) {
	for {
		offs, err := list(ctx, topic)
		if err == nil {
			err = offs.Error()
		}
		if err == nil || !kerr.IsRetriable(err) {
			return offs, err
		}
		t := time.NewTimer(listRetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return offs, err
		case <-t.C:
		}
	}
}

// listRetryEvery is how long listOffsets waits before asking again.
const listRetryEvery = 100 * time.Millisecond

// withBrokerMessage adds the message a topic's error code came with.
func withBrokerMessage(err error, msg string) error {
	if msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}

type topicJSON struct {
	Topic      string          `json:"topic"`
	Partitions int             `json:"partitions"`
	Replicas   int             `json:"replicas"`
	Details    []partitionJSON `json:"partitionDetails,omitempty"`
}

type partitionJSON struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	StartOffset int64   `json:"startOffset"`
	EndOffset   int64   `json:"endOffset"`
}

func topicSummary(d kadm.TopicDetail) topicJSON {
	t := topicJSON{Topic: d.Topic, Partitions: len(d.Partitions)}
	for _, p := range d.Partitions {
		t.Replicas = max(t.Replicas, len(p.Replicas))
	}
	return t
}

func topicsList(kf *kafkaFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List topics with their partition and replica counts",
		Args:  cobra.NoArgs,
		RunE: kf.run(func(ctx context.Context, adm *kadm.Client, w io.Writer, _ []string) error {
			details, err := adm.ListTopics(ctx)
			if err != nil {
				return kafkaError("list topics", err, kf.brokers)
			}
			out := []topicJSON{}
			for _, d := range details.Sorted() {
				out = append(out, topicSummary(d))
			}
			return printValue(w, kf.json, out, func(w io.Writer) {
				row(w, "TOPIC", "PARTITIONS", "REPLICAS")
				for _, t := range out {
					row(w, t.Topic, t.Partitions, t.Replicas)
				}
			})
		}),
	}
}

func topicsCreate(kf *kafkaFlags) *cobra.Command {
	var partitions int32
	var replication int16
	cmd := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic; one that exists already is refused",
		Args:  cobra.ExactArgs(1),
		RunE: kf.run(func(ctx context.Context, adm *kadm.Client, w io.Writer, args []string) error {
			r, err := adm.CreateTopic(ctx, partitions, replication, nil, args[0])
			if err != nil {
				return kafkaError("create topic "+args[0], withBrokerMessage(err, r.ErrMessage), kf.brokers)
			}
			out := topicJSON{Topic: r.Topic, Partitions: int(r.NumPartitions), Replicas: int(r.ReplicationFactor)}
			return printValue(w, kf.json, out, func(w io.Writer) {
				row(w, "TOPIC", "PARTITIONS", "REPLICAS")
				row(w, out.Topic, out.Partitions, out.Replicas)
			})
		}),
	}
	cmd.Flags().Int32Var(&partitions, "partitions", -1, "partitions (-1: the broker's QUEEN_KAFKA_DEFAULT_PARTITIONS)")
	cmd.Flags().Int16Var(&replication, "replication-factor", -1, "replicas (-1: the broker's; queen replicates every partition on all voters)")
	return cmd
}

func topicsDescribe(kf *kafkaFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TOPIC",
		Short: "Show a topic's partitions: leader, replicas, start and end offsets",
		Args:  cobra.ExactArgs(1),
		RunE: kf.run(func(ctx context.Context, adm *kadm.Client, w io.Writer, args []string) error {
			details, err := adm.ListTopics(ctx, args[0])
			if err != nil {
				return kafkaError("describe topic "+args[0], err, kf.brokers)
			}
			d, ok := details[args[0]]
			if !ok {
				return refusedError("refused: topic %q: %v", args[0], kerr.UnknownTopicOrPartition)
			}
			if d.Err != nil {
				return kafkaError("describe topic "+args[0], d.Err, kf.brokers)
			}
			starts, err := listOffsets(ctx, adm.ListStartOffsets, args[0])
			if err != nil {
				return kafkaError("start offsets of "+args[0], err, kf.brokers)
			}
			ends, err := listOffsets(ctx, adm.ListEndOffsets, args[0])
			if err != nil {
				return kafkaError("end offsets of "+args[0], err, kf.brokers)
			}
			out := topicSummary(d)
			for _, p := range d.Partitions.Sorted() {
				pj := partitionJSON{Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR, StartOffset: -1, EndOffset: -1}
				if o, ok := starts.Lookup(args[0], p.Partition); ok {
					pj.StartOffset = o.Offset
				}
				if o, ok := ends.Lookup(args[0], p.Partition); ok {
					pj.EndOffset = o.Offset
				}
				out.Details = append(out.Details, pj)
			}
			sort.Slice(out.Details, func(i, j int) bool { return out.Details[i].Partition < out.Details[j].Partition })
			return printValue(w, kf.json, out, func(w io.Writer) {
				row(w, "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "START_OFFSET", "END_OFFSET")
				for _, p := range out.Details {
					row(w, out.Topic, p.Partition, p.Leader, ints(p.Replicas), ints(p.ISR), p.StartOffset, p.EndOffset)
				}
			})
		}),
	}
}

func topicsDelete(kf *kafkaFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete TOPIC",
		Short: "Delete a topic and its records; one that does not exist is refused",
		Args:  cobra.ExactArgs(1),
		RunE: kf.run(func(ctx context.Context, adm *kadm.Client, w io.Writer, args []string) error {
			r, err := adm.DeleteTopic(ctx, args[0])
			if err != nil {
				return kafkaError("delete topic "+args[0], withBrokerMessage(err, r.ErrMessage), kf.brokers)
			}
			out := map[string]any{"topic": args[0], "deleted": true}
			return printValue(w, kf.json, out, func(w io.Writer) {
				row(w, "TOPIC", "DELETED")
				row(w, args[0], true)
			})
		}),
	}
}

func ints(v []int32) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
