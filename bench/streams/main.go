// Command streams measures Streams cycles (POST /streams/v1/cycle) on one
// node against POST /api/v1/transaction doing the same work, rounds
// interleaved (see workload.Streams). It starts its own node (built from
// this checkout, temp data dir, free ports) unless -url points at one.
// `queen bench streams` runs the same code.
//
//	go run ./bench/streams
//	go run ./bench/streams -cycles 2000 -rounds 6 -workers 8 -batch 10 -state 4
package main

import (
	"io"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

func main() {
	var o workload.StreamsOptions
	workload.Main(o.Register, func(start node.Starter, w io.Writer) error { return workload.Streams(o, start, w) })
}
