package kafka

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// kcat runs kcat (librdkafka) with args and stdin, bounded by ctx.
func kcat(ctx context.Context, t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// kcat with its defaults: -L lists the brokers and topics, -P produces keys
// and headers, -C consumes them back, in order.
func TestKcatRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed (.ci/run installs it)")
	}
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 60*time.Second)
	b := c.Nodes[0].KafkaAddr

	lines := "alice:hello\nbob:{\"n\":2}\ncarol:third line\n"
	kcat(ctx, t, lines, "-b", b, "-P", "-t", "kc", "-K:", "-H", "origin=kcat", "-H", "trace=1")
	meta := kcat(ctx, t, "", "-b", b, "-L", "-t", "kc")
	if !strings.Contains(meta, `topic "kc" with 1 partitions`) || !strings.Contains(meta, "1 brokers:") {
		t.Fatalf("kcat -L:\n%s", meta)
	}
	got := kcat(ctx, t, "", "-b", b, "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k=%s|%h|%o\n")
	want := "alice=hello|origin=kcat,trace=1|0\nbob={\"n\":2}|origin=kcat,trace=1|1\ncarol=third line|origin=kcat,trace=1|2\n"
	if got != want {
		t.Fatalf("kcat -C:\n%s\nwant:\n%s", got, want)
	}
	all := kcat(ctx, t, "", "-b", b, "-L")
	if !strings.Contains(all, `topic "kc"`) {
		t.Fatalf("kcat -L without a topic:\n%s", all)
	}
}
