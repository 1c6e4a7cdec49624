package kafka

import (
	"bytes"
	"fmt"
	"os/exec"
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
	adm := adminOf(e2etest.KafkaClient(t, c.Nodes[0]))
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &client}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	// Described by the node: its cache is re-read at once after a change
	// made through it, within a second otherwise.
	qs, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{
		{Type: "client-id", MatchName: &client, MatchType: kmsg.QuotasMatchTypeExact}})
	if err != nil || len(qs) != 1 {
		t.Fatalf("describe: %v %+v", err, qs)
	}
	createTopics(ctx, t, adm, 1, "kq")

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
