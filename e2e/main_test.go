// Package e2e drives real queen processes over their real ports: the binary
// is built once, every test starts its own nodes on free 127.0.0.1 ports
// with temp data dirs, and stops them when it ends.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

var queenBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "queen-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	queenBin, err = harness.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startCluster starts n nodes and waits until all are healthy; the nodes
// (and the fault proxies of a proxied cluster) are stopped when the test
// ends, and the nodes' logs shown if it failed.
func startCluster(t *testing.T, o harness.Options) *harness.Cluster {
	t.Helper()
	return startPreparedCluster(t, o, nil)
}

// startPreparedCluster is startCluster with prepare, when not nil, run on
// the allocated nodes before any of them starts (to change their settings
// or set up their data dirs).
func startPreparedCluster(t *testing.T, o harness.Options, prepare func(*harness.Cluster)) *harness.Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := tryStartCluster(t, o, prepare)
		if err == nil {
			return c
		}
		// Free ports are found by binding and releasing them, so another
		// process on the machine can take one before the node binds it;
		// such a start is retried on fresh ports.
		if attempt == 3 || !portTaken(c) {
			t.Fatal(err)
		}
		t.Logf("a port was taken before a node bound it; starting again on fresh ports: %v", err)
		c.Close()
	}
}

func tryStartCluster(t *testing.T, o harness.Options, prepare func(*harness.Cluster)) (*harness.Cluster, error) {
	t.Helper()
	o.BaseDir = t.TempDir()
	c, err := harness.NewCluster(queenBin, o)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(c) // before the stop is registered: its own cleanups run after the nodes stop
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d log tail:\n%s", n.ID, n.Tail(4000))
			}
		}
		c.Close()
	})
	if err := c.StartAll(); err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c, c.WaitAllHealthy(ctx)
}

// portTaken reports whether a node of c failed to bind one of its ports.
func portTaken(c *harness.Cluster) bool {
	for _, n := range c.Nodes {
		if n.Grep("address already in use") {
			return true
		}
	}
	return false
}

func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
