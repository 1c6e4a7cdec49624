package ops

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// What a node logs: a fresh single node with default settings says what it
// was configured with and that it serves, in its own `config:` and `boot:`
// lines, with none of dragonboat's election chatter; LOG_LEVEL=debug
// brings that back and LOG_FORMAT=json writes JSON.

func TestFreshNodeBootLogIsQuiet(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 60*time.Second)
	// The node registers its Kafka address once it leads: by then every
	// group has elected, the noisiest part of a boot.
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) { return n.Grep("kafka: node registered"), nil }); err != nil {
		t.Fatalf("node never registered: %v\n%s", err, n.Tail(3000))
	}
	lines := strings.Split(strings.TrimSpace(n.Log()), "\n")
	served := false
	var config, boot int
	for _, l := range lines {
		level, msg := textField(l, "level"), textField(l, "msg")
		if level == "" || msg == "" {
			t.Errorf("not a log line of ours: %q", l)
			continue
		}
		if strings.Contains(l, "component=dragonboat") && level != "WARN" && level != "ERROR" {
			t.Errorf("dragonboat below WARN: %s", l)
		}
		if level == "WARN" || level == "ERROR" {
			t.Errorf("a fresh default node warns: %s", l)
		}
		switch {
		case strings.HasPrefix(msg, "config:"):
			config++
		case strings.HasPrefix(msg, "boot:"):
			boot++
		case !served:
			t.Errorf("before it serves, a node logs only config: and boot: lines, got %s", l)
		}
		if msg == "boot: serving" {
			served = true
		}
	}
	if !served || config < 5 || boot < 2 {
		t.Fatalf("boot log lacks its config: (%d) or boot: (%d) lines, served %v:\n%s", config, boot, served, n.Log())
	}

	// Restarted with LOG_LEVEL=debug and LOG_FORMAT=json: JSON lines, and
	// dragonboat's own lines are back.
	n.Stop()
	before := len(n.Log())
	n.Env["LOG_LEVEL"], n.Env["LOG_FORMAT"] = "debug", "json"
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		return strings.Contains(n.Log()[before:], `"component":"dragonboat/`), nil
	}); err != nil {
		t.Fatalf("LOG_LEVEL=debug shows no dragonboat line:\n%s", n.Tail(3000))
	}
	for _, l := range strings.Split(strings.TrimSpace(n.Log()[before:]), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil {
			t.Fatalf("LOG_FORMAT=json wrote a line that is not a JSON record: %q (%v)", l, err)
		}
	}
}

// textField is the value of key in one slog text line ("" when absent),
// quoted or not.
func textField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		end := 1
		for end < len(v) && (v[end] != '"' || v[end-1] == '\\') {
			end++
		}
		return v[1:min(end, len(v))]
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		return v[:j]
	}
	return v
}
