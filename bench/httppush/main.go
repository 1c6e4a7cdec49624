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
	"io"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

func main() {
	var o workload.PushOptions
	workload.Main(o.Register, func(start node.Starter, w io.Writer) error { return workload.Push(o, start, w) })
}
