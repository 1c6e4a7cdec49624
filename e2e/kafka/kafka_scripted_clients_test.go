package kafka

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Kafka clients in other languages, each running the same script flow
// (e2e/clients/<client>/roundtrip.*) against a real node.

// kafkajs (Node.js) against a real node: topic creation, a produce with
// acks=-1, keys and headers, and a consumer group whose auto-committed
// offsets a second member resumes from. The script is
// e2e/clients/kafkajs/roundtrip.js; .ci/run installs its one dependency.
func TestKafkaJSRoundTripThroughAGroup(t *testing.T) {
	dir := filepath.Join("..", "clients", "kafkajs")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		t.Skip("kafkajs is not installed (.ci/run runs npm ci in e2e/clients/kafkajs)")
	}
	runClientScript(t, dir, node, "roundtrip.js")
}

// kafka-python (Debian's python3-kafka) against a real node, the same flow
// as the kafkajs test: e2e/clients/kafka-python/roundtrip.py.
func TestKafkaPythonRoundTripThroughAGroup(t *testing.T) {
	// Debian's package serves Debian's interpreter, which may not be the
	// first python3 on PATH (pyenv, a venv).
	python := ""
	for _, candidate := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(candidate); err == nil && exec.Command(path, "-c", "import kafka").Run() == nil {
			python = path
			break
		}
	}
	if python == "" {
		t.Skip("kafka-python is not installed (.ci/run installs python3-kafka)")
	}
	runClientScript(t, filepath.Join("..", "clients", "kafka-python"), python, "roundtrip.py")
}

// runClientScript runs a client's roundtrip script (in dir, with the
// node's Kafka address, a topic, a group and a record count) against a
// fresh node, and checks the records it printed: every value once, in
// order per partition, keys in one partition, headers intact; the first
// group member got them all and the second, resuming at the committed
// offsets, only the 10 produced after; and the group shows no lag over
// HTTP.
func runClientScript(t *testing.T, dir, interpreter, script string) {
	t.Helper()
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 90*time.Second)
	const topic, group, n = "client-orders", "client-g", otherClientRecords

	cmd := exec.CommandContext(ctx, interpreter, script, c.Nodes[0].KafkaAddr, topic, group, strconv.Itoa(n))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}

	ledger := newLedger(t)
	members := map[int]int{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r struct {
			Member    int
			Partition int32
			Offset    int64
			Key       string
			Value     string
			Header    string
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s printed %q: %v", script, sc.Text(), err)
		}
		ledger.add(r.Partition, r.Offset, []byte(r.Key), []byte(r.Value), r.Header)
		members[r.Member]++
	}
	ledger.check(t, n+10)
	if members[1] != n || members[2] != 10 {
		t.Fatalf("first member consumed %d (want %d), the second %d (want the 10 new ones)", members[1], n, members[2])
	}
	row := httpGroup(ctx, t, c.Nodes[0].URL(), group, topic)
	if row.TotalLag != 0 || row.PartitionCursors != 3 {
		t.Fatalf("HTTP view of the %s group: %+v", script, row)
	}
}
