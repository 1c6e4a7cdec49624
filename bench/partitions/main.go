// Command partitions measures what many logical partitions cost: one
// message in each of -partitions partitions of one queue, drained by two
// consumer groups with pops of partitions=64 (leases and auto-ack), with
// push and drain rates, each node's RSS, the paged views' times and the
// boot time after a restart (see workload.Partitions). It starts its own
// nodes (built from this checkout, temp data dirs, free ports).
// `queen bench partitions` runs the same code.
//
//	go run ./bench/partitions                        # 10,000,000 partitions, one node
//	go run ./bench/partitions -nodes 3 -partitions 1000000
//	go run ./bench/partitions -partitions 1000000 -cleanup 30s  # then retention empties them, idle ones removed
package main

import (
	"io"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

func main() {
	var o workload.PartitionsOptions
	workload.Main(o.Register, func(start node.Starter, w io.Writer) error { return workload.Partitions(o, start, w) })
}
