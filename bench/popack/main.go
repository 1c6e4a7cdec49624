// Command popack measures the consuming side of the HTTP API on one node:
// pop+ack throughput over a preloaded queue, then push→pop latency (see
// workload.PopAck). It starts its own node (built from this checkout, temp
// data dir, free ports) unless -url points at one. `queen bench popack`
// runs the same code.
//
//	go run ./bench/popack
//	go run ./bench/popack -consumers 64 -batch 100 -partitions 100
package main

import (
	"io"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

func main() {
	var o workload.PopAckOptions
	workload.Main(o.Register, func(start node.Starter, w io.Writer) error { return workload.PopAck(o, start, w) })
}
