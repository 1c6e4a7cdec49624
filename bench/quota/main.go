// Command quota measures a producer held to a client quota: it sets
// producer_byte_rate (1 MB/s by default) for a client id with kadm, then
// a franz-go producer with that id writes as fast as it is let for 30 s,
// and it prints the measured MB/s, the throttles the client's
// OnBrokerThrottle hook saw and the longest, and client errors (see
// workload.Quota). It starts its own node (built from this checkout, temp
// data dir, free ports) unless -brokers points at one. `queen bench
// quota` runs the same code.
//
//	go run ./bench/quota
//	go run ./bench/quota -rate 500000 -duration 60s
package main

import (
	"io"

	"github.com/queen-mq/queen/bench/node"
	"github.com/queen-mq/queen/bench/workload"
)

func main() {
	var o workload.QuotaOptions
	workload.Main(o.Register, func(start node.Starter, w io.Writer) error { return workload.Quota(o, start, w) })
}
