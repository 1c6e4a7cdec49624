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

// startCluster starts n nodes and waits until all are healthy; the nodes are
// stopped when the test ends (and their logs shown if it failed).
func startCluster(t *testing.T, o harness.Options) *harness.Cluster {
	t.Helper()
	o.BaseDir = t.TempDir()
	c, err := harness.NewCluster(queenBin, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d log tail:\n%s", n.ID, n.Tail(4000))
			}
		}
		c.StopAll()
	})
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitAllHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
