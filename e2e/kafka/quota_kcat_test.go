package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// kcatThrottle is the line kcat prints from librdkafka's throttle
// callback: the throttle_time_ms a broker answered, the value librdkafka
// also adds to that broker's "throttle" window in its statistics JSON.
var kcatThrottle = regexp.MustCompile(`throttled request for (\d+)ms`)

// A real librdkafka client under a client quota: producer_byte_rate set
// with kadm for kcat's client id; kcat produces 400 records of 1 KB in
// batches of 16 KB, uncompressed. librdkafka reports the throttle_time_ms
// it was answered (kcat prints its throttle callback; Debian's kcat sets
// no statistics callback, so statistics.interval.ms shows nothing), kcat
// reports no error and exits 0, the rate holds, and every record is there
// to consume.
func TestKcatProducerUnderByteRateQuota(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed (.ci/run installs it)")
	}
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	b := c.Nodes[0].KafkaAddr
	const rate, records, size = 50_000, 400, 1000 // bytes/s; 400 KB: about 7 s at the rate
	client := "kcat-quota"
	quotaForClient(ctx, t, c.Nodes[0], client, rate, "kq")

	var in strings.Builder
	value := strings.Repeat("v", size)
	for i := range records {
		fmt.Fprintf(&in, "k%04d:%s\n", i, value)
	}
	cmd := exec.CommandContext(ctx, "kcat", "-b", b, "-P", "-t", "kq", "-K:", "-p", "0",
		"-X", "client.id="+client, "-X", "batch.size=16384", "-X", "linger.ms=5",
		"-X", "compression.codec=none", "-X", "acks=all")
	cmd.Stdin = strings.NewReader(in.String())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat -P under the quota: %v\n%s", err, errOut.String())
	}
	took := time.Since(began)
	var throttles, maxThrottle int64
	for _, line := range strings.Split(errOut.String(), "\n") {
		if m := kcatThrottle.FindStringSubmatch(line); m != nil {
			ms, _ := strconv.ParseInt(m[1], 10, 64)
			throttles, maxThrottle = throttles+1, max(maxThrottle, ms)
		} else if strings.TrimSpace(line) != "" {
			t.Fatalf("kcat reported more than throttles: %q\n%s", line, errOut.String())
		}
	}
	// Past the burst (a second of quota) the rest goes at the rate.
	measured := float64(records*size-rate) / took.Seconds()
	t.Logf("kcat produced %d x %d B in %v (%.0f B/s past the burst, quota %d B/s); librdkafka saw %d throttles, longest %d ms",
		records, size, took.Round(time.Millisecond), measured, rate, throttles, maxThrottle)
	if throttles == 0 || maxThrottle <= 0 {
		t.Fatal("librdkafka never reported a throttle")
	}
	if measured > 1.25*rate {
		t.Fatalf("kcat wrote %.0f B/s under a quota of %d B/s", measured, rate)
	}

	got := kcat(ctx, t, "", "-b", b, "-C", "-t", "kq", "-o", "beginning", "-e", "-q", "-f", "%k\n")
	keys := map[string]bool{}
	for _, k := range strings.Fields(got) {
		keys[k] = true
	}
	if len(keys) != records {
		t.Fatalf("consumed %d distinct records of %d produced", len(keys), records)
	}
}

// quotaForClient sets producer_byte_rate for a client id with kadm and
// creates a one-partition topic.
func quotaForClient(ctx context.Context, t *testing.T, n *harness.Node, client string, rate float64, topic string) {
	t.Helper()
	adm := adminOf(e2etest.KafkaClient(t, n))
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &client}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	// Described by the node: its cache is re-read at once after a change
	// made through it.
	qs, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{
		{Type: "client-id", MatchName: &client, MatchType: kmsg.QuotasMatchTypeExact}})
	if err != nil || len(qs) != 1 {
		t.Fatalf("describe: %v %+v", err, qs)
	}
	createTopics(ctx, t, adm, 1, topic)
}

// rdkafkaStats is the part of librdkafka's statistics JSON read here: per
// broker, the throttle_time_ms window since the last emission.
type rdkafkaStats struct {
	Brokers map[string]struct {
		Throttle struct {
			Max int64 `json:"max"`
			Cnt int64 `json:"cnt"`
		} `json:"throttle"`
	} `json:"brokers"`
}

// librdkafka's statistics under a client quota: e2e/clients/rdkafka's
// stats_producer (librdkafka with a statistics callback, which kcat
// lacks) produces 300 records of 1 KB under producer_byte_rate with
// statistics.interval.ms=200; the broker's "throttle" window in the
// statistics JSON shows the throttle, every record is delivered with no
// error, and kcat reads them all back.
func TestLibrdkafkaStatisticsShowQuotaThrottle(t *testing.T) {
	for _, tool := range []string{"cc", "kcat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	bin := filepath.Join(t.TempDir(), "stats_producer")
	if out, err := exec.Command("cc", "-o", bin, "../clients/rdkafka/stats_producer.c", "-l:librdkafka.so.1").CombinedOutput(); err != nil {
		t.Skipf("no librdkafka to build against (kcat's runtime library): %v\n%s", err, out)
	}
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	b := c.Nodes[0].KafkaAddr
	const rate, records, size = 50_000, 300, 1000
	client := "rdkafka-stats"
	quotaForClient(ctx, t, c.Nodes[0], client, rate, "kstats")

	cmd := exec.CommandContext(ctx, bin, b, "kstats", client, strconv.Itoa(records), strconv.Itoa(size),
		"statistics.interval.ms=200", "batch.size=16384", "linger.ms=5", "compression.codec=none", "acks=all")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("stats_producer: %v\n%s", err, errOut.String())
	}
	if s := strings.TrimSpace(errOut.String()); s != fmt.Sprintf("delivered %d failed 0 of %d", records, records) {
		t.Fatalf("librdkafka reported:\n%s", s)
	}
	var windows, throttledWindows, maxThrottle int64
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var st rdkafkaStats
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatalf("statistics line: %v\n%.300s", err, line)
		}
		windows++
		for _, br := range st.Brokers {
			if br.Throttle.Cnt > 0 && br.Throttle.Max > 0 {
				throttledWindows++
				maxThrottle = max(maxThrottle, br.Throttle.Max)
			}
		}
	}
	t.Logf("%d statistics windows, %d with the broker's throttle window above 0, max %d ms", windows, throttledWindows, maxThrottle)
	if throttledWindows == 0 {
		t.Fatalf("no statistics window showed a throttle (%d windows)", windows)
	}
	got := kcat(ctx, t, "", "-b", b, "-C", "-t", "kstats", "-o", "beginning", "-e", "-q", "-f", "%k\n")
	keys := map[string]bool{}
	for _, k := range strings.Fields(got) {
		keys[k] = true
	}
	if len(keys) != records {
		t.Fatalf("consumed %d distinct records of %d produced", len(keys), records)
	}
}
