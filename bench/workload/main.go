package workload

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/queen-mq/queen/bench/node"
)

// Main is the whole of a `go run ./bench/<name>` program: register adds
// the workload's flags, run measures against nodes built from this
// checkout and prints to stdout; an error is printed and exits 1. It takes
// the same pair `queen bench <name>` does.
func Main(register func(*flag.FlagSet), run func(node.Starter, io.Writer) error) {
	register(flag.CommandLine)
	flag.Parse()
	if err := run(node.StartCluster, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
