// Package node starts queen nodes for the benchmark programs: the binary
// built from this checkout, temp data dirs, free ports (e2e/harness).
package node

import (
	"context"
	"os"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// Start starts n nodes (1 or a 3-node cluster) with env added to the
// benchmark defaults, waits until they are healthy and returns their
// clients' URLs and a stop function that also removes their data.
func Start(n int, env map[string]string) (stop func(), urls []string, err error) {
	c, stop, err := StartCluster(n, env)
	if err != nil {
		return nil, nil, err
	}
	for _, nd := range c.Nodes {
		urls = append(urls, nd.URL())
	}
	return stop, urls, nil
}

// StartCluster is Start for benchmarks that need more of each node than its
// URL (the Kafka benchmark needs its Kafka address).
func StartCluster(n int, env map[string]string) (*harness.Cluster, func(), error) {
	dir, err := os.MkdirTemp("", "queen-bench")
	if err != nil {
		return nil, nil, err
	}
	bin, err := harness.Build(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
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
	stop := func() { c.StopAll(); os.RemoveAll(dir) }
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
