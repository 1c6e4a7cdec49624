package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The command line (docs/cli.md) run as a user runs it: the real binary,
// against a real node, reading its table and --json output and its exit
// codes.

// cliResult is one run of the binary.
type cliResult struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// cli runs the queen binary with args in dir (a temp dir when ""), with
// env added to the test's environment and stdin fed in.
func cli(t *testing.T, ctx context.Context, dir string, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cmd := exec.CommandContext(ctx, e2etest.QueenBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errOut.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("queen %v: %v", args, err)
	}
	return r
}

// TestCLIHelpAndVersionTouchNothing: asking the binary what it is answers
// within a second, exits 0 and opens no data dir (it does not serve).
func TestCLIHelpAndVersionTouchNothing(t *testing.T) {
	ctx := e2etest.Deadline(t, time.Minute)
	work := t.TempDir()
	raftDir := filepath.Join(t.TempDir(), "must-not-exist")
	env := []string{"QUEEN_RAFT_DIR=" + raftDir}
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"version"}, {"version", "--json"}, {"--version"},
		{"serve", "--help"}, {"queues", "--help"}, {"push", "--help"}, {"topics", "list", "--help"},
		{"cluster", "--help"}, {"bench", "push", "--help"}, {"config", "--help"},
	} {
		r := cli(t, ctx, work, env, "", args...)
		if r.code != 0 || r.took > time.Second {
			t.Fatalf("queen %v: exit %d after %v\n%s%s", args, r.code, r.took, r.stdout, r.stderr)
		}
		if args[len(args)-1] != "--help" && args[0] != "help" && args[0] != "-h" && !strings.Contains(r.stdout, "0.1.0") {
			t.Fatalf("queen %v: no version in %q", args, r.stdout)
		}
		if args[0] == "--help" && !strings.Contains(r.stdout, "Available Commands") {
			t.Fatalf("queen --help: %q", r.stdout)
		}
		if entries, _ := os.ReadDir(work); len(entries) != 0 {
			t.Fatalf("queen %v created %v in its working directory", args, entries[0].Name())
		}
		if _, err := os.Stat(raftDir); !os.IsNotExist(err) {
			t.Fatalf("queen %v created QUEEN_RAFT_DIR (%v)", args, err)
		}
	}
	// queen config reads the settings as a boot would, and still starts nothing.
	r := cli(t, ctx, work, append(env, "QUEEN_RAFT_TOKEN=t0psecret"), "", "config")
	if r.code != 0 || r.took > time.Second || !strings.Contains(r.stdout, raftDir) || !strings.Contains(r.stdout, "<set>") ||
		strings.Contains(r.stdout, "t0psecret") {
		t.Fatalf("queen config: exit %d after %v\n%s%s", r.code, r.took, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Fatalf("queen config created %v", entries[0].Name())
	}
	if _, err := os.Stat(raftDir); !os.IsNotExist(err) {
		t.Fatalf("queen config created QUEEN_RAFT_DIR (%v)", err)
	}
	var v struct{ Version, Commit, Go string }
	r = cli(t, ctx, work, env, "", "version", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Version != "0.1.0" || !strings.HasPrefix(v.Go, "go1.") || v.Commit == "" {
		t.Fatalf("version --json: %v %q", err, r.stdout)
	}
	// An unknown command is a usage error, not a broker start.
	if r := cli(t, ctx, work, env, "", "no-such-command"); r.code != 1 || !strings.Contains(r.stderr, "unknown command") {
		t.Fatalf("unknown command: exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(raftDir); !os.IsNotExist(err) {
		t.Fatalf("an unknown command created QUEEN_RAFT_DIR (%v)", err)
	}
}

// cliSession runs commands against one node.
type cliSession struct {
	t   *testing.T
	ctx context.Context
	env []string
}

// ok runs a command that must succeed and returns its stdout.
func (s *cliSession) ok(stdin string, args ...string) string {
	s.t.Helper()
	r := cli(s.t, s.ctx, "", s.env, stdin, args...)
	if r.code != 0 {
		s.t.Fatalf("queen %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// table runs a command and checks its table holds every want.
func (s *cliSession) table(args []string, want ...string) string {
	s.t.Helper()
	return s.tableIn("", args, want...)
}

// tableIn is table with stdin.
func (s *cliSession) tableIn(stdin string, args []string, want ...string) string {
	s.t.Helper()
	out := s.ok(stdin, args...)
	for _, w := range want {
		if !strings.Contains(out, w) {
			s.t.Fatalf("queen %v: table lacks %q:\n%s", args, w, out)
		}
	}
	return out
}

// json runs a command with --json and decodes its output.
func (s *cliSession) json(stdin string, out any, args ...string) string {
	s.t.Helper()
	raw := s.ok(stdin, append(args, "--json")...)
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		s.t.Fatalf("queen %v --json: %v\n%s", args, err, raw)
	}
	return raw
}

// refused runs a command that must exit with code and name why on stderr.
func (s *cliSession) refused(code int, stderr string, stdin string, args ...string) {
	s.t.Helper()
	r := cli(s.t, s.ctx, "", s.env, stdin, args...)
	if r.code != code || !strings.Contains(r.stderr, stderr) {
		s.t.Fatalf("queen %v: exit %d stderr %q; want exit %d and %q", args, r.code, r.stderr, code, stderr)
	}
}

// TestCLIClientCommands drives every client command against one node.
func TestCLIClientCommands(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2})
	n := c.Nodes[0]
	s := &cliSession{t: t, ctx: e2etest.Deadline(t, 3*time.Minute),
		env: []string{"QUEEN_URL=" + n.URL(), "QUEEN_BROKERS=" + n.KafkaAddr, "QUEEN_TOKEN="}}

	var leasedLater string // a message the pop-ack step finds leased by another pop
	t.Run("queues", func(t *testing.T) {
		s.t = t
		s.table([]string{"queues", "create", "orders", "--namespace", "shop", "--option", "leaseTime=60"}, "orders", "shop", "leaseTime", "60")
		var created struct {
			Configured bool           `json:"configured"`
			Options    map[string]any `json:"options"`
		}
		s.json("", &created, "queues", "create", "orders", "--option", "retryLimit=7")
		if !created.Configured || created.Options["retryLimit"] != float64(7) || created.Options["leaseTime"] != float64(60) {
			t.Fatalf("create --json: %+v", created)
		}
		s.table([]string{"queues", "list"}, "NAME", "PARTITIONS", "orders", "shop")
		var list struct {
			Queues []struct{ Name string } `json:"queues"`
		}
		s.json("", &list, "queues", "list")
		if len(list.Queues) != 1 || list.Queues[0].Name != "orders" {
			t.Fatalf("list --json: %+v", list)
		}
	})

	t.Run("push", func(t *testing.T) {
		s.t = t
		s.table([]string{"push", "orders", `{"n":1}`, "plain text", "--partition", "p1"}, "STATUS", "queued", "orders")
		var pushed []struct {
			Status        string `json:"status"`
			Offset        uint64 `json:"offset"`
			TransactionID string `json:"transaction_id"`
		}
		s.json("3\n4\n", &pushed, "push", "orders", "-", "--partition", "p1")
		if len(pushed) != 2 || pushed[0].Status != "queued" || pushed[1].Offset != 3 {
			t.Fatalf("push --json: %+v", pushed)
		}
		leasedLater = pushed[0].TransactionID
		// Refused: a body the server rejects, and one item refused in a batch.
		s.refused(2, "(400 bad_request)", `{"items":[{"payload":1}]}`, "push", "--body", "-")
		s.refused(1, "needs a QUEUE", "", "push", "orders")
	})

	t.Run("describe", func(t *testing.T) {
		s.t = t
		s.table([]string{"queues", "describe", "orders"}, "PARTITION", "p1", "retryLimit", "7")
		var d struct {
			Totals     struct{ Total int } `json:"totals"`
			Partitions []struct {
				Name          string `json:"name"`
				HighWatermark int    `json:"highWatermark"`
			} `json:"partitions"`
		}
		s.json("", &d, "queues", "describe", "orders")
		if d.Totals.Total != 4 || len(d.Partitions) != 1 || d.Partitions[0].Name != "p1" || d.Partitions[0].HighWatermark != 4 {
			t.Fatalf("describe --json: %+v", d)
		}
		s.refused(2, "(404 queue_not_found)", "", "queues", "describe", "nosuch")
	})

	t.Run("pop-ack", func(t *testing.T) {
		s.t = t
		var popped struct {
			LeaseID     string `json:"leaseId"`
			PartitionID string `json:"partitionId"`
			Messages    []struct {
				TransactionID string          `json:"transactionId"`
				Data          json.RawMessage `json:"data"`
			} `json:"messages"`
		}
		raw := s.json("", &popped, "pop", "orders", "--batch", "2")
		if len(popped.Messages) != 2 || string(popped.Messages[0].Data) != `{"n":1}` || string(popped.Messages[1].Data) != `"plain text"` {
			t.Fatalf("pop --json: %s", raw)
		}
		s.tableIn(raw, []string{"ack", "--from", "-"}, "SUCCESS", "true", popped.Messages[0].TransactionID)
		out := s.table([]string{"pop", "orders", "--batch", "5"}, "OFFSET", "TRANSACTION_ID", `3`, `4`)
		if strings.Contains(out, `{"n":1}`) {
			t.Fatalf("an acknowledged message came back:\n%s", out)
		}
		// The two just popped are leased: nothing is left to pop.
		var empty struct{ Messages []any }
		s.json("", &empty, "pop", "orders")
		if len(empty.Messages) != 0 {
			t.Fatalf("pop of a drained queue: %+v", empty)
		}
		s.table([]string{"pop", "orders"}, "no messages")
		// Refused: a message leased by the second pop, acknowledged under
		// the first pop's (released) lease; a malformed lease id.
		s.refused(2, "refused: 1 of 1 acknowledgments", "", "ack", leasedLater, "--partition-id", popped.PartitionID, "--lease-id", popped.LeaseID)
		s.refused(2, "(400 bad_request)", "", "ack", leasedLater, "--partition-id", popped.PartitionID, "--lease-id", "bogus")
	})

	t.Run("groups", func(t *testing.T) {
		s.t = t
		var p e2etest.PopAnswer
		s.json("", &p, "pop", "orders", "--group", "billing", "--subscription", "all", "--batch", "1")
		if len(p.Messages) != 1 {
			t.Fatalf("group pop: %+v", p)
		}
		s.table([]string{"groups", "list"}, "GROUP", "billing", "orders")
		var rows []struct{ Name, QueueName string }
		s.json("", &rows, "groups", "list")
		found := false
		for _, r := range rows {
			found = found || (r.Name == "billing" && r.QueueName == "orders")
		}
		if !found {
			t.Fatalf("groups list --json: %+v", rows)
		}
		s.table([]string{"groups", "describe", "billing"}, "QUEUE", "orders", "p1")
		var d map[string]struct {
			Partitions []struct{ Partition string } `json:"partitions"`
		}
		s.json("", &d, "groups", "describe", "billing")
		if len(d["orders"].Partitions) != 1 || d["orders"].Partitions[0].Partition != "p1" {
			t.Fatalf("groups describe --json: %+v", d)
		}
		s.refused(2, "no subscription or position", "", "groups", "describe", "nosuch")
		s.table([]string{"groups", "seek", "billing", "orders", "--to-end"}, "PARTITIONS_UPDATED", "true")
		var seek struct {
			Success   bool `json:"success"`
			SeekToEnd bool `json:"seekToEnd"`
		}
		s.json("", &seek, "groups", "seek", "billing", "orders", "--to-time", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
		if !seek.Success || seek.SeekToEnd {
			t.Fatalf("seek --json: %+v", seek)
		}
		s.refused(1, "one of --to-end and --to-time", "", "groups", "seek", "billing", "orders")
	})

	t.Run("dlq", func(t *testing.T) {
		s.t = t
		s.ok("", "queues", "create", "fragile", "--option", "retryLimit=0")
		s.ok("", "push", "fragile", `{"job":1}`)
		var p e2etest.PopAnswer
		raw := s.json("", &p, "pop", "fragile")
		if len(p.Messages) != 1 {
			t.Fatalf("pop fragile: %s", raw)
		}
		s.tableIn(raw, []string{"ack", "--from", "-", "--failed", "--error", "boom"}, "true")
		var list struct {
			Total    int `json:"total"`
			Messages []struct {
				ID           string  `json:"id"`
				Queue        string  `json:"queue"`
				ErrorMessage *string `json:"errorMessage"`
			} `json:"messages"`
		}
		s.json("", &list, "dlq", "list", "--queue", "fragile")
		if list.Total != 1 || len(list.Messages) != 1 || list.Messages[0].Queue != "fragile" {
			t.Fatalf("dlq list --json: %+v", list)
		}
		id := list.Messages[0].ID
		s.table([]string{"dlq", "list"}, "ID", "FAILED_AT", id, "fragile", "boom")
		s.table([]string{"dlq", "replay", id}, "RESULT", "moved", "fragile")
		s.table([]string{"dlq", "replay", id}, "duplicate") // a replay is idempotent
		s.refused(2, "(404 not_found)", "", "dlq", "replay", "987654321")
		s.refused(1, "dead-letter row id", "", "dlq", "replay", "abc")
		var after struct{ Total int }
		s.json("", &after, "dlq", "list", "--queue", "fragile")
		if after.Total != 0 {
			t.Fatalf("dlq after replay: %+v", after)
		}
	})

	t.Run("kv", func(t *testing.T) {
		s.t = t
		s.table([]string{"kv", "put", "app", "user/1", `{"name":"ada"}`}, "APPLIED", "true")
		s.table([]string{"kv", "get", "app", "user/1"}, "VERSION", `{"name":"ada"}`)
		var got struct {
			Found   bool            `json:"found"`
			Value   json.RawMessage `json:"value"`
			Version uint64          `json:"version"`
		}
		s.json("", &got, "kv", "get", "app", "user/1")
		if !got.Found || string(got.Value) != `{"name":"ada"}` || got.Version == 0 {
			t.Fatalf("kv get --json: %+v", got)
		}
		var put struct {
			Applied bool   `json:"applied"`
			Version uint64 `json:"version"`
		}
		s.json("", &put, "kv", "put", "app", "user/1", "2", "--if-version", strconv.FormatUint(got.Version, 10))
		if !put.Applied || put.Version <= got.Version {
			t.Fatalf("kv put --if-version --json: %+v", put)
		}
		s.refused(2, "version_mismatch", "", "kv", "put", "app", "user/1", "3", "--if-version", strconv.FormatUint(got.Version, 10))
		s.table([]string{"kv", "delete", "app", "user/1"}, "APPLIED", "true")
		s.refused(2, "not found", "", "kv", "get", "app", "user/1")
		s.refused(2, "not_found", "", "kv", "delete", "app", "user/1")
	})

	t.Run("cluster", func(t *testing.T) {
		s.t = t
		s.table([]string{"cluster", "status"}, "GROUP", "leader", "healthy")
		var h struct {
			Status string `json:"status"`
			Groups []struct {
				Role string `json:"role"`
			} `json:"groups"`
		}
		s.json("", &h, "cluster", "status")
		if h.Status != "healthy" || len(h.Groups) != 2 || h.Groups[0].Role != "leader" {
			t.Fatalf("cluster status --json: %+v", h)
		}
		s.table([]string{"cluster", "members"}, "NODE", "voter", n.RaftAddr)
		var m struct {
			Membership membershipView `json:"membership"`
		}
		s.json("", &m, "cluster", "members")
		if len(m.Membership.Voters) != 1 || m.Membership.Voters[0] != 1 {
			t.Fatalf("cluster members --json: %+v", m)
		}
		s.refused(2, "(404", "", "cluster", "remove", "9")
		s.refused(1, "positive whole number", "", "cluster", "promote", "x")

		// A second node joins: added as a learner, promoted once caught up,
		// then removed again.
		n2, err := c.AddNode(t.TempDir(), 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(n2); err != nil {
			t.Fatal(err)
		}
		s.table([]string{"cluster", "add", "2", "--raft", n2.RaftAddr, "--http", n2.HTTPAddr}, "learner", n2.RaftAddr)
		err = harness.Poll(s.ctx, 200*time.Millisecond, func() (bool, error) {
			r := cli(t, s.ctx, "", s.env, "", "cluster", "promote", "2", "--json")
			switch {
			case r.code == 0:
				return json.Unmarshal([]byte(r.stdout), &m) == nil && len(m.Membership.Voters) == 2, nil
			case r.code == 2 && (strings.Contains(r.stderr, "learner_behind") || strings.Contains(r.stderr, "in_flight")):
				return false, nil
			}
			return false, errors.New(r.stderr)
		})
		if err != nil {
			t.Fatalf("promote: %v", err)
		}
		s.table([]string{"cluster", "members"}, "2", "voter", n2.HTTPAddr)
		s.table([]string{"cluster", "remove", "2"}, "NODE")
		n2.Stop()
		c.Remove(n2)
		s.json("", &m, "cluster", "members")
		if len(m.Membership.Voters) != 1 {
			t.Fatalf("after remove: %+v", m)
		}
	})

	t.Run("topics", func(t *testing.T) {
		s.t = t
		s.table([]string{"topics", "create", "events", "--partitions", "3"}, "TOPIC", "events", "3")
		s.refused(2, "TOPIC_ALREADY_EXISTS", "", "topics", "create", "events")
		s.table([]string{"topics", "list"}, "PARTITIONS", "events")
		var list []struct {
			Topic      string `json:"topic"`
			Partitions int    `json:"partitions"`
		}
		s.json("", &list, "topics", "list")
		found := false
		for _, tp := range list {
			found = found || (tp.Topic == "events" && tp.Partitions == 3)
		}
		if !found {
			t.Fatalf("topics list --json: %+v", list)
		}
		out := s.table([]string{"topics", "describe", "events"}, "PARTITION", "LEADER", "END_OFFSET")
		if strings.Count(out, "events") != 3 {
			t.Fatalf("describe shows %d partition rows:\n%s", strings.Count(out, "events"), out)
		}
		var d struct {
			Details []struct {
				Partition int32 `json:"partition"`
				EndOffset int64 `json:"endOffset"`
			} `json:"partitionDetails"`
		}
		s.json("", &d, "topics", "describe", "events")
		if len(d.Details) != 3 || d.Details[2].Partition != 2 || d.Details[0].EndOffset != 0 {
			t.Fatalf("topics describe --json: %+v", d)
		}
		s.table([]string{"topics", "delete", "events"}, "DELETED", "true")
		s.refused(2, "UNKNOWN_TOPIC_OR_PARTITION", "", "topics", "delete", "events")
	})

	t.Run("delete", func(t *testing.T) {
		s.t = t
		s.refused(2, "does not exist", "", "queues", "delete", "nosuch")
		s.table([]string{"queues", "delete", "nosuch", "--if-exists"}, "false")
		var del struct {
			Deleted bool `json:"deleted"`
		}
		s.json("", &del, "queues", "delete", "orders")
		if !del.Deleted {
			t.Fatalf("delete --json: %+v", del)
		}
		s.refused(2, "(404 queue_not_found)", "", "queues", "describe", "orders")
	})

	t.Run("unreachable", func(t *testing.T) {
		s.t = t
		s.refused(3, "cannot reach", "", "queues", "list", "--url", "http://127.0.0.1:1")
	})
}

// TestCLIBench: `queen bench` measures with nodes it starts from its own
// binary, and leaves nothing behind.
func TestCLIBench(t *testing.T) {
	ctx := e2etest.Deadline(t, 2*time.Minute)
	tmp := t.TempDir()
	r := cli(t, ctx, "", []string{"TMPDIR=" + tmp}, "", "bench", "push", "--duration", "1s", "--warmup", "200ms", "--clients", "2", "--batch", "10")
	if r.code != 0 || !strings.Contains(r.stdout, "msg/s") || !strings.Contains(r.stdout, "requests:") || !strings.Contains(r.stdout, "(errors 0)") {
		t.Fatalf("bench push: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("bench left %s behind", entries[0].Name())
	}
	if r := cli(t, ctx, "", nil, "", "bench", "push", "--size", "1"); r.code != 1 || !strings.Contains(r.stderr, "size must be at least 2") {
		t.Fatalf("bench with a bad size: exit %d %q", r.code, r.stderr)
	}
	// The many-partitions run, small: every phase reports, both drains
	// get every message.
	r = cli(t, ctx, "", []string{"TMPDIR=" + tmp}, "", "bench", "partitions", "--partitions", "300", "--consumers", "2")
	for _, want := range []string{"push           300 messages", "drain leases   300 messages", "drain autoack  300 messages",
		"rss at rest after the restart", "boot node 1 to healthy", "view /api/v1/resources/partitions?queue=many&limit=100"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("bench partitions: exit %d, no %q\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if r := cli(t, ctx, "", nil, "", "bench", "partitions", "--nodes", "2"); r.code != 1 || !strings.Contains(r.stderr, "nodes 1 or 3") {
		t.Fatalf("bench partitions with 2 nodes: exit %d %q", r.code, r.stderr)
	}
}
