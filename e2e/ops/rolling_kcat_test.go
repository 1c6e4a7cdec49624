package ops

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// kcatLoad is a librdkafka idempotent producer and consumer-group member
// (two kcat processes) running through a rolling restart.
type kcatLoad struct {
	mu       sync.Mutex
	written  []string
	seen     *seen
	stderr   *lockedWriter // both processes' diagnostics
	producer *exec.Cmd
	consumer *exec.Cmd
	stdin    io.WriteCloser
	done     chan struct{} // the producer's feeder ended
	read     chan struct{} // the consumer's stdout ended
	exited   chan error    // the producer's exit
}

// startKcatLoad starts both kcat processes against brokers, on topic; the
// producer is fed a numbered line every 20 ms until stopProducing.
func startKcatLoad(ctx context.Context, t *testing.T, brokers, topic string) *kcatLoad {
	t.Helper()
	l := &kcatLoad{seen: &seen{m: map[string]int{}}, done: make(chan struct{}), read: make(chan struct{}),
		exited: make(chan error, 1), stderr: &lockedWriter{}}
	errs := l.stderr
	l.producer = exec.CommandContext(ctx, "kcat", "-b", brokers, "-P", "-t", topic,
		"-X", "enable.idempotence=true", "-X", "message.timeout.ms=60000")
	l.producer.Stderr = errs
	stdin, err := l.producer.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	l.stdin = stdin
	l.consumer = exec.CommandContext(ctx, "kcat", "-b", brokers, "-G", "roll-kcat-group", topic,
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500",
		"-f", "%s\n", "-q", "-u") // -u: a line per record as it arrives, not when a buffer fills
	l.consumer.Stderr = errs
	out, err := l.consumer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.producer.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.exited <- l.producer.Wait() }()
	if err := l.consumer.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(l.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l.seen.add(sc.Text())
		}
	}()
	t.Cleanup(func() {
		_ = l.producer.Process.Kill()
		_ = l.consumer.Process.Kill()
		<-l.exited
		_ = l.consumer.Wait()
	})
	return l
}

// feed writes lines until ctx ends, then closes the producer's stdin so it
// flushes and exits.
func (l *kcatLoad) feed(ctx context.Context) {
	defer close(l.done)
	defer l.stdin.Close()
	tick := time.NewTicker(20 * time.Millisecond) // the producer's pace
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		v := fmt.Sprintf("c-%d", i)
		if _, err := io.WriteString(l.stdin, v+"\n"); err != nil {
			return
		}
		l.mu.Lock()
		l.written = append(l.written, v)
		l.mu.Unlock()
	}
}

// errors returns kcat's error lines ("% ERROR"), less librdkafka's
// reports of a closed broker connection: librdkafka passes those to the
// application's error callback for information only and reconnects by
// itself, as it does when a Kafka broker stops (kcat prints them all).
func (l *kcatLoad) errors() []string {
	var out []string
	for _, line := range strings.Split(l.stderrString(), "\n") {
		if strings.Contains(line, "ERROR") && !strings.Contains(line, "Broker transport failure") {
			out = append(out, line)
		}
	}
	return out
}

func (l *kcatLoad) stderrString() string {
	l.stderr.mu.Lock()
	defer l.stderr.mu.Unlock()
	return l.stderr.b.String()
}

// stopProducing ends the feed and waits for the producer to flush and
// exit.
func (l *kcatLoad) stopProducing(ctx context.Context, t *testing.T) []string {
	t.Helper()
	<-l.done
	select {
	case err := <-l.exited:
		l.exited <- err // for the cleanup
		if err != nil {
			t.Errorf("kcat producer: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("kcat producer did not exit after its input ended")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written
}

// lockedWriter lets two processes share one buffer.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
