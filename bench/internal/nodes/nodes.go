// Package nodes starts the queen nodes a benchmark runs against: the binary
// built from this checkout, temp data dirs, free ports (e2e/harness).
package nodes

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// Start starts n nodes with env on top of the benchmark defaults (a 50 ms
// raft RTT, warnings only) and waits until all are healthy. stop stops them
// and removes their data.
func Start(n int, env map[string]string) (c *harness.Cluster, stop func(), err error) {
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
	c, err = harness.NewCluster(bin, harness.Options{Nodes: n, BaseDir: dir, Env: all})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	stop = func() { c.StopAll(); os.RemoveAll(dir) }
	if err := c.StartAll(); err != nil {
		stop()
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitAllHealthy(ctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("nodes: %w", err)
	}
	return c, stop, nil
}
