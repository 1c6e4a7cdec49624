package main

import (
	"errors"
	"flag"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

// `queen bench` runs the benchmark programs' code (bench/workload) so a
// user measures their own machine with the binary alone: unless pointed at
// running nodes it starts them from this very binary, on free 127.0.0.1
// ports with temp data dirs it removes afterwards.

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure this machine: HTTP push, pop+ack, Streams and Kafka throughput and latency",
		Long: `Run a benchmark against nodes this binary starts (free 127.0.0.1 ports, temp
data dirs removed afterwards), or against running ones with --url / --brokers.
The same code as 'go run ./bench/...' in the source tree; docs/cli.md shows
sample output.`,
	}
	var push workload.PushOptions
	var popack workload.PopAckOptions
	var kafka workload.KafkaOptions
	var partitions workload.PartitionsOptions
	var streams workload.StreamsOptions
	var quota workload.QuotaOptions
	cmd.AddCommand(
		benchCommand("push", "HTTP push throughput and latency (batches from many clients)", push.Register,
			func(start node.Starter, w io.Writer) error { return workload.Push(push, start, w) }),
		benchCommand("popack", "HTTP pop+ack throughput over a preloaded queue, then push→pop latency", popack.Register,
			func(start node.Starter, w io.Writer) error { return workload.PopAck(popack, start, w) }),
		benchCommand("kafka", "Kafka produce (acks=all, idempotent) and consume throughput, produce latency", kafka.Register,
			func(start node.Starter, w io.Writer) error { return workload.Kafka(kafka, start, w) }),
		benchCommand("partitions", "One message in each of millions of partitions: push, drains, memory, views, boot", partitions.Register,
			func(start node.Starter, w io.Writer) error { return workload.Partitions(partitions, start, w) }),
		benchCommand("streams", "Streams cycles against /api/v1/transaction doing the same work, rounds interleaved", streams.Register,
			func(start node.Starter, w io.Writer) error { return workload.Streams(streams, start, w) }),
		benchCommand("quota", "A producer held to producer_byte_rate: measured MB/s, throttles seen, errors", quota.Register,
			func(start node.Starter, w io.Writer) error { return workload.Quota(quota, start, w) }),
	)
	return cmd
}

// benchCommand makes one benchmark a subcommand: its flags are the
// workload's own (registered on a Go flag set, shown as --name).
func benchCommand(name, short string, register func(*flag.FlagSet), run func(node.Starter, io.Writer) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return serverError("cannot find this binary to start nodes from: %v", err)
			}
			if err := run(node.Binary(self), cmd.OutOrStdout()); err != nil {
				if errors.Is(err, workload.ErrOptions) {
					return usageError("bench %s: %v", name, err)
				}
				return serverError("bench %s: %v", name, err)
			}
			return nil
		},
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	register(fs)
	cmd.Flags().AddGoFlagSet(fs)
	return cmd
}
