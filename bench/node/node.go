// Package node starts queen nodes for the benchmarks: free 127.0.0.1
// ports and temp data dirs (e2e/harness), from the binary built from this
// checkout (the go run ./bench/... programs) or from a given binary
// (`queen bench`, which starts nodes from itself).
package node

import (
	"context"
	"os"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// Starter starts n nodes (1 or a 3-node cluster) with env added to the
// benchmark defaults, waits until they are healthy and returns them and a
// stop function that also removes their data and gives their ports back
// (a program starting many nodes in turn, bench/guard, reserves none for
// good).
type Starter func(n int, env map[string]string) (*harness.Cluster, func(), error)

// StartCluster builds ./cmd/queen of this checkout and starts its nodes.
func StartCluster(n int, env map[string]string) (*harness.Cluster, func(), error) {
	return start("", n, env)
}

// Binary starts nodes from the queen binary at bin.
func Binary(bin string) Starter {
	return func(n int, env map[string]string) (*harness.Cluster, func(), error) { return start(bin, n, env) }
}

func start(bin string, n int, env map[string]string) (*harness.Cluster, func(), error) {
	dir, err := os.MkdirTemp("", "queen-bench")
	if err != nil {
		return nil, nil, err
	}
	if bin == "" {
		if bin, err = harness.Build(dir); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
	}
	all := map[string]string{"QUEEN_RAFT_RTT_MS": "50", "LOG_LEVEL": "warn"}
	for k, v := range env {
		all[k] = v
	}
	c, err := harness.NewCluster(bin, harness.Options{Nodes: n, BaseDir: dir, Env: all})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	stop := func() { c.Close(); os.RemoveAll(dir) }
	if err := c.StartAll(); err != nil {
		stop()
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitAllHealthy(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}
