// Command kafka measures the Kafka door: franz-go producers write 1 KiB
// records (acks=all, idempotent, 5 ms linger) to an 8-partition topic while
// a franz-go consumer reads them, for a fixed time (see workload.Kafka).
// It starts its own node or 3-node cluster (built from this checkout, temp
// data dirs, free ports) unless -brokers points at one. `queen bench
// kafka` runs the same code.
//
//	go run ./bench/kafka -nodes 1
//	go run ./bench/kafka -nodes 3 -producers 4
package main

import (
	"io"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

func main() {
	var o workload.KafkaOptions
	workload.Main(o.Register, func(start node.Starter, w io.Writer) error { return workload.Kafka(o, start, w) })
}
