package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/queen-mq/queen/bench/node"
)

// broker is one started broker process: its Kafka address, its pid (for
// /proc/<pid>/stat) and how to stop it and remove its data.
type broker struct {
	seeds []string
	pid   int
	// alive reports whether the process still runs; logTail is the end
	// of its log, for an error.
	alive   func() bool
	logTail func() string
	stop    func()
}

// startQueen starts a one-node queen from bin with env (bench/node: free
// 127.0.0.1 ports, a temp data dir, the benchmark defaults).
func startQueen(bin string, env map[string]string) (*broker, error) {
	c, stop, err := node.Binary(bin)(1, env)
	if err != nil {
		return nil, err
	}
	n := c.Nodes[0]
	return &broker{
		seeds:   []string{n.KafkaAddr},
		pid:     n.Pid(),
		alive:   n.Running,
		logTail: func() string { return n.Tail(2000) },
		stop:    stop,
	}, nil
}

// kfakeServeFlag is the hidden flag that makes the guard the anchor broker
// instead: it runs kfake with its data in the flag's directory.
const kfakeServeFlag = "kfake-serve"

// startKfake runs the anchor in a process of its own (this binary again,
// with -kfake-serve), so its CPU is read from /proc like queen's: kfake
// persisting every batch with fsync in a fresh temp dir, on a free
// 127.0.0.1 port it reports on its stdout.
func startKfake(partitions int) (*broker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "queen-guard-kfake")
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(dir + ".log")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cleanup := func() { logf.Close(); os.Remove(logf.Name()); os.RemoveAll(dir) }
	cmd := exec.Command(self, "-"+kfakeServeFlag, dir, "-partitions", strconv.Itoa(partitions))
	cmd.Stderr = logf
	// It dies with the guard even when the guard is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cleanup()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, err
	}
	exited := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		cleanup()
	}
	tail := func() string {
		b, _ := os.ReadFile(logf.Name())
		return string(b[max(0, len(b)-2000):])
	}
	select {
	case a := <-addr:
		return &broker{
			seeds: []string{a}, pid: cmd.Process.Pid, stop: stop, logTail: tail,
			alive: func() bool {
				select {
				case <-exited:
					return false
				default:
					return true
				}
			},
		}, nil
	case <-exited:
		t := tail()
		cleanup()
		return nil, fmt.Errorf("kfake exited before listening: %s", t)
	case <-time.After(30 * time.Second):
		stop()
		return nil, errors.New("kfake did not report its address within 30 s")
	}
}

// serveKfake is the anchor process: kfake with one broker on a free
// 127.0.0.1 port, persisting to dir with an fsync per batch, until SIGTERM
// or SIGINT.
func serveKfake(dir string, partitions int) error {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(0),
		kfake.DataDir(dir),
		kfake.SyncWrites(),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "16777216"}),
	)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Printf("listening %s\n", c.ListenAddrs()[0])
	<-sig
	c.Close()
	return nil
}
