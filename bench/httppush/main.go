// Command httppush measures HTTP push throughput and latency: many
// concurrent clients push batches of fixed-size messages to a queen node for
// a fixed time, and it prints messages/s, MB/s and request latency
// percentiles. It starts its own node or 3-node cluster (built from this
// checkout, temp data dirs, free ports) unless -url points at one.
// `queen bench push` runs the same code (bench/workload).
//
//	go run ./bench/httppush -nodes 1
//	go run ./bench/httppush -nodes 3 -clients 128
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

func main() {
	var o workload.PushOptions
	o.Register(flag.CommandLine)
	flag.Parse()
	if err := workload.Push(o, node.StartCluster, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
