package e2etest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// queen is the binary the tests run, built (or found built) on first use.
var queen struct {
	once    sync.Once
	bin     string
	release func()
	err     error
}

// Main is the TestMain of every end-to-end package: it has the process
// take its nodes' ports from blocks it owns (harness.UsePortBlocks: no
// other test process hands out the same ones), runs the package's tests
// and exits with their status.
//
// The queen binary is got by the first test that starts a node
// (QueenBinary), not here: go test caches a package's result by the files
// its tests read, and the shared build reads every source file of the
// module while a test runs, so a change to the broker runs the end-to-end
// tests again instead of answering from the cache.
func Main(m *testing.M) {
	harness.UsePortBlocks()
	code := m.Run()
	if queen.release != nil {
		queen.release()
	}
	os.Exit(code)
}

// QueenBinary is the path of the queen binary built from this checkout
// (harness.SharedBuild: built once and shared by the packages go test runs
// side by side); t fails when it cannot be built.
func QueenBinary(t testing.TB) string {
	t.Helper()
	queen.once.Do(func() { queen.bin, queen.release, queen.err = harness.SharedBuild() })
	if queen.err != nil {
		t.Fatal(queen.err)
	}
	return queen.bin
}

// StartCluster starts n nodes and waits until all are healthy; the nodes
// (and the fault proxies of a proxied cluster) are stopped when the test
// ends, and the nodes' logs shown if it failed.
func StartCluster(t *testing.T, o harness.Options) *harness.Cluster {
	t.Helper()
	return StartPreparedCluster(t, o, nil)
}

// StartPreparedCluster is StartCluster with prepare, when not nil, run on
// the allocated nodes before any of them starts (to change their settings
// or set up their data dirs).
func StartPreparedCluster(t *testing.T, o harness.Options, prepare func(*harness.Cluster)) *harness.Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := tryStartCluster(t, o, prepare)
		if err == nil {
			return c
		}
		// A free port is checked free when it is handed out, so another
		// process on the machine can still take it before the node binds
		// it; such a start is retried on fresh ports.
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
	c, err := harness.NewCluster(QueenBinary(t), o)
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

// Deadline is a context that ends after d or when the test ends.
func Deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
