package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// mountSmallFS mounts a tmpfs of size at dir for the test, or skips the
// test when this machine does not allow it.
func mountSmallFS(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("the disk-full test mounts a small tmpfs, which needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs is not permitted here (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", dir, err, out)
		}
	})
}

// fillTo writes a ballast file in dir until the filesystem is pct% used
// (100: until it refuses a byte more) and returns its path.
func fillTo(dir string, pct float64) (string, error) {
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	chunk := make([]byte, 256<<10)
	for i := range chunk {
		chunk[i] = byte(i) | 1 // not zeros: every page is really stored
	}
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			return path, err
		}
		used := float64(st.Blocks-st.Bfree) / float64(st.Blocks) * 100
		if pct < 100 && used >= pct {
			return path, nil
		}
		n := len(chunk)
		if pct < 100 {
			n = min(n, int((pct-used)/100*float64(st.Blocks)*float64(st.Bsize))+4096)
		}
		if _, err := f.Write(chunk[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path, nil
			}
			return path, err
		}
	}
}

// storageFull reads a node's /health storageFull flag.
func storageFull(ctx context.Context, n *harness.Node) (bool, error) {
	var h struct {
		StorageFull bool `json:"storageFull"`
	}
	_, err := e2etest.Call(ctx, http.MethodGet, n.URL()+"/health", nil, &h)
	return h.StorageFull, err
}

// Every node's data lives on its own small filesystem. First the disks
// fill past the high watermark while the clients work: every node must
// refuse new data with a clean error (HTTP 507 storage_full, a Kafka
// error) and accept it again once the space returns. Then one node's disk
// fills completely, so that even replication to it fails: the majority
// must go on, and the node must come back (restarted if it died) and
// catch up once space returns. Nothing acknowledged may be lost.
func TestFaultDiskFull(t *testing.T) {
	ctx := e2etest.Deadline(t, 4*time.Minute)
	var fsDirs []string
	c := e2etest.StartPreparedCluster(t, harness.Options{Nodes: 3}, func(c *harness.Cluster) {
		fsDirs = make([]string, len(c.Nodes))
		for i, n := range c.Nodes {
			fsDirs[i] = filepath.Join(n.Dir, "fs")
			mountSmallFS(t, fsDirs[i], "512m")
			n.Env["QUEEN_RAFT_DIR"] = filepath.Join(fsDirs[i], "data")
		}
	})
	w := startWorkload(t, ctx, c, defaultWorkload())

	// Past the high watermark (85%) on every node.
	var ballast []string
	for _, d := range fsDirs {
		p, err := fillTo(d, 92)
		if err != nil {
			t.Fatal("filling the disk:", err)
		}
		ballast = append(ballast, p)
	}
	for _, n := range c.Nodes {
		if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
			full, err := storageFull(ctx, n)
			return err == nil && full, nil
		}); err != nil {
			t.Fatalf("node %d never reported storageFull: %v", n.ID, err)
		}
	}
	for _, n := range c.Nodes {
		var e e2etest.ErrorAnswer
		w.led.hSent(fmt.Sprintf("full-%d", n.ID), -1, 0, "full") // consumers would get it if it were stored
		code, err := e2etest.Call(ctx, http.MethodPost, n.URL()+"/api/v1/push",
			map[string]any{"items": []e2etest.PushItem{{Queue: faultQueue, Partition: "full", Payload: 1, TransactionID: fmt.Sprintf("full-%d", n.ID)}}}, &e)
		if err != nil || code != http.StatusInsufficientStorage || e.Code != "storage_full" {
			t.Errorf("push to node %d with its disk full: %d %q %v, want 507 storage_full", n.ID, code, e.Code, err)
		}
	}
	kp := e2etest.KgoClient(t, c, kgo.DefaultProduceTopic(faultTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(3*time.Second))
	if err := kp.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("while-full")}).FirstErr(); err == nil {
		t.Error("a Kafka produce with every disk full was acknowledged")
	} else {
		t.Logf("Kafka produce with the disks full: %v", err)
	}
	for _, p := range ballast {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.progressWithin(ctx, 60*time.Second, 300); err != nil {
		t.Fatal(w.noProgress("after the space returned", err))
	}

	// One node's disk full to the last byte, replication included.
	victim := c.Nodes[2]
	p, err := fillTo(fsDirs[2], 100)
	if err != nil {
		t.Fatal("filling the disk:", err)
	}
	if err := w.progressWithin(ctx, 60*time.Second, 300); err != nil {
		t.Fatal(w.noProgress("with node 3's disk completely full", err))
	}
	var e e2etest.ErrorAnswer
	w.led.hSent("enospc", -1, 0, "full")
	code, perr := e2etest.Call(ctx, http.MethodPost, victim.URL()+"/api/v1/push",
		map[string]any{"items": []e2etest.PushItem{{Queue: faultQueue, Partition: "full", Payload: 1, TransactionID: "enospc"}}}, &e)
	t.Logf("node 3 with no byte free: running=%v, push answered %d %q %v", victim.Running(), code, e.Code, perr)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if !victim.Running() {
		why := "no panic logged"
		for _, line := range strings.Split(victim.Log(), "\n") {
			if strings.HasPrefix(line, "panic: ") {
				why = line
				break
			}
		}
		t.Logf("node 3 exited on the full disk (exit code %d, %s); restarting it", victim.ExitCode(), why)
		if err := c.Start(victim); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitCaughtUp(ctx, w, victim); err != nil {
		t.Fatal("after the space returned:", err)
	}
	f := &figures{Fault: "disk-full", Rounds: 2}
	w.finish(ctx, f)
}
