package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// /metrics/prometheus as a Prometheus server and Grafana read it: a real
// node's scrape parsed by Prometheus' own text parser, and the dashboard in
// docs/grafana checked against that scrape.

// TestPrometheusScrapeIsWhatScrapersExpect: after HTTP and Kafka traffic
// with a group behind on each side, every family of a real scrape has
// HELP and TYPE, histograms have `le` buckets, names follow Prometheus'
// conventions, lag gauges show both groups per queue and per partition,
// docs/metrics.md lists every family, and every metric the Grafana
// dashboard queries exists.
func TestPrometheusScrapeIsWhatScrapersExpect(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_KAFKA_DEFAULT_PARTITIONS": "1"}})
	base := c.Nodes[0].URL()
	ctx := e2etest.Deadline(t, 90*time.Second)
	const tenant = "00000000-0000-0000-0000-000000000001"

	// HTTP: ten messages, the group "billing" consumes four.
	e2etest.PushN(t, ctx, base, "invoices", "p1", 10)
	if got := e2etest.PopAck(t, ctx, base, "invoices", "p1", "billing", 4, "completed"); len(got) != 4 {
		t.Fatalf("popped %d, want 4", len(got))
	}
	// Kafka: ten records, read back by a plain fetch, and the group
	// "reporting" commits offset 3 (seven behind the end).
	prod := e2etest.KgoClient(t, c, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("orders"))
	for i := 0; i < 10; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("order %d", i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	e2etest.ConsumeN(ctx, t, cons, 10)
	if codes := e2etest.CommitOffsets(ctx, t, prod, "reporting", "", -1, map[int32]int64{0: 3}); codes[0] != 0 {
		t.Fatalf("commit: error code %d", codes[0])
	}

	var fams map[string]*dto.MetricFamily
	var raw string
	lagged := func() bool {
		fams, raw = e2etest.Scrape(ctx, t, base)
		h, _ := e2etest.SampleValue(fams["queen_consumer_group_lag_messages"], map[string]string{"queue": "invoices", "group": "billing"})
		k, _ := e2etest.SampleValue(fams["queen_consumer_group_lag_messages"], map[string]string{"queue": "orders", "group": "reporting"})
		return h == 6 && k == 7
	}
	if err := harness.Poll(ctx, 100*time.Millisecond, func() (bool, error) { return lagged(), nil }); err != nil {
		t.Fatalf("lag gauges never showed 6 (HTTP) and 7 (Kafka): %v\n%s", err, grepLines(raw, "lag"))
	}

	t.Run("every family typed and described", func(t *testing.T) {
		for name, f := range fams {
			if !strings.Contains(raw, "\n# TYPE "+name+" ") && !strings.HasPrefix(raw, "# TYPE "+name+" ") {
				t.Errorf("%s has no TYPE line", name)
			}
			if !strings.Contains(raw, "# HELP "+name+" ") {
				t.Errorf("%s has no HELP line", name)
			}
			if strings.HasPrefix(name, "queen_") && (f.GetHelp() == "" || strings.HasPrefix(f.GetHelp(), "Undocumented")) {
				t.Errorf("%s has no HELP text: %q", name, f.GetHelp())
			}
			if f.GetType() == dto.MetricType_UNTYPED {
				t.Errorf("%s is untyped", name)
			}
		}
	})
	t.Run("histograms have le buckets", func(t *testing.T) {
		if strings.Contains(raw, "vmrange") {
			t.Errorf("a histogram still uses vmrange buckets:\n%s", grepLines(raw, "vmrange"))
		}
		histograms := 0
		for name, f := range fams {
			if f.GetType() != dto.MetricType_HISTOGRAM {
				continue
			}
			histograms++
			for _, m := range f.GetMetric() {
				if len(m.GetHistogram().GetBucket()) < 2 {
					t.Errorf("%s %v: %d buckets", name, m.GetLabel(), len(m.GetHistogram().GetBucket()))
				}
			}
			if !strings.Contains(raw, name+`_bucket{`) || !strings.Contains(raw, `le="+Inf"`) {
				t.Errorf("%s has no le buckets in the text", name)
			}
		}
		for _, want := range []string{"queen_http_request_duration_seconds", "queen_kafka_request_duration_seconds", "queen_raft_proposal_duration_seconds"} {
			if fams[want].GetType() != dto.MetricType_HISTOGRAM || len(fams[want].GetMetric()) == 0 {
				t.Errorf("%s: missing or not a histogram", want)
			}
		}
	})
	t.Run("names follow Prometheus conventions", func(t *testing.T) {
		for name, f := range fams {
			if !strings.HasPrefix(name, "queen_") {
				continue
			}
			if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
			if f.GetType() != dto.MetricType_COUNTER && strings.HasSuffix(name, "_total") {
				t.Errorf("%s ends in _total but is a %s", name, f.GetType())
			}
			if f.GetType() == dto.MetricType_HISTOGRAM && !strings.HasSuffix(name, "_seconds") {
				t.Errorf("histogram %s is not in seconds", name)
			}
			for _, unit := range []string{"_ms", "_millis", "_kb", "_mb", "_percent"} {
				if strings.Contains(name, unit) {
					t.Errorf("%s uses %s instead of a base unit", name, unit)
				}
			}
		}
	})
	t.Run("lag per group and partition", func(t *testing.T) {
		for _, c := range []struct {
			queue, group string
			want         float64
		}{{"invoices", "billing", 6}, {"orders", "reporting", 7}} {
			labels := map[string]string{"tenant": tenant, "queue": c.queue, "group": c.group}
			if v, ok := e2etest.SampleValue(fams["queen_consumer_group_lag_messages"], labels); !ok || v != c.want {
				t.Errorf("queue lag %v = %v (%v), want %v", labels, v, ok, c.want)
			}
			if v, ok := e2etest.SampleValue(fams["queen_consumer_group_partition_lag_messages"], labels); !ok || v != c.want {
				t.Errorf("partition lag %v = %v (%v), want %v", labels, v, ok, c.want)
			}
		}
		if v, _ := e2etest.SampleValue(fams["queen_consumer_group_partition_lag_messages"], map[string]string{"queue": "invoices", "partition": "p1"}); v != 6 {
			t.Errorf("partition p1 lag %v, want 6", v)
		}
	})
	t.Run("traffic counters", func(t *testing.T) {
		for name, least := range map[string]float64{
			"queen_http_push_messages_total": 10, "queen_http_push_bytes_total": 1,
			"queen_http_pop_messages_total": 4, "queen_http_pop_bytes_total": 1,
			"queen_kafka_produce_records_total": 10, "queen_kafka_produce_bytes_total": 1,
			"queen_kafka_fetch_records_total": 10, "queen_kafka_fetch_bytes_total": 1,
		} {
			if v, ok := e2etest.SampleValue(fams[name], nil); !ok || v < least {
				t.Errorf("%s = %v (%v), want at least %v", name, v, ok, least)
			}
		}
		for _, name := range []string{"queen_raft_term", "queen_raft_is_leader", "queen_raft_apply_lag_entries", "queen_raft_snapshots_total", "queen_data_dir_bytes"} {
			if len(fams[name].GetMetric()) == 0 {
				t.Errorf("%s missing", name)
			}
		}
		if v, _ := e2etest.SampleValue(fams["queen_data_dir_bytes"], nil); v <= 0 {
			t.Errorf("queen_data_dir_bytes = %v", v)
		}
	})
	t.Run("docs/metrics.md lists every family", func(t *testing.T) {
		doc, err := os.ReadFile("../../docs/metrics.md")
		if err != nil {
			t.Fatal(err)
		}
		for name := range fams {
			if strings.HasPrefix(name, "queen_") && !bytes.Contains(doc, []byte("`"+name+"`")) {
				t.Errorf("docs/metrics.md does not list %s", name)
			}
		}
	})
	t.Run("dashboard queries only scraped metrics", func(t *testing.T) {
		exprs := dashboardExprs(t, "../../docs/grafana/queen.json")
		if len(exprs) < 6 {
			t.Fatalf("the dashboard has %d queries", len(exprs))
		}
		for _, expr := range exprs {
			names := promqlMetricNames(expr)
			if len(names) == 0 {
				t.Errorf("query %q names no metric", expr)
			}
			for _, n := range names {
				if !scraped(fams, n) {
					t.Errorf("query %q reads %s, which the scrape does not have", expr, n)
				}
			}
		}
	})
}

// scraped says whether a metric name a query reads is in the scrape: a
// family, or a histogram's _bucket, _sum or _count series.
func scraped(fams map[string]*dto.MetricFamily, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && (f.GetType() == dto.MetricType_HISTOGRAM || (suffix != "_bucket" && f.GetType() == dto.MetricType_SUMMARY)) {
				return true
			}
		}
	}
	return false
}

// dashboardExprs is every target expression of a Grafana dashboard,
// panels nested in rows included.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	return exprs
}

// promqlWord is a PromQL identifier with what follows it.
var promqlWord = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// promqlMetricNames picks the metric names out of a PromQL expression:
// identifiers that are not functions, keywords, label names in by/without
// or label matchers, or range and quoted text. Queen's dashboard names its
// series by their full names, so this need not be a whole PromQL parser.
func promqlMetricNames(expr string) []string {
	// Drop quoted strings and [range] selectors first.
	expr = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(expr, `""`)
	expr = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(expr, ``)
	// Drop label matchers {…} and grouping clauses by/without (…).
	expr = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(expr, ``)
	expr = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(expr, ``)
	var names []string
	for _, loc := range promqlWord.FindAllStringIndex(expr, -1) {
		w := expr[loc[0]:loc[1]]
		rest := strings.TrimLeft(expr[loc[1]:], " ")
		if strings.HasPrefix(rest, "(") || slices.Contains(promqlKeywords, w) {
			continue // a function call or an operator keyword
		}
		if loc[0] > 0 && (expr[loc[0]-1] >= '0' && expr[loc[0]-1] <= '9' || expr[loc[0]-1] == '.') {
			continue // a number's exponent or unit
		}
		if !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	return names
}

var promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestPromqlMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le, route) (rate(queen_http_request_duration_seconds_bucket{route=~"/api/v1/push"}[5m])))`: {"queen_http_request_duration_seconds_bucket"},
		`sum(rate(queen_kafka_produce_records_total[1m])) + sum(rate(queen_http_push_messages_total[1m]))`:                           {"queen_kafka_produce_records_total", "queen_http_push_messages_total"},
		`max by (group) (queen_raft_term) * 1e3`:                                                     {"queen_raft_term"},
		`max by (group) (queen_raft_commit_index) - on (group) group_right queen_raft_applied_index`: {"queen_raft_commit_index", "queen_raft_applied_index"},
	} {
		if got := promqlMetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", expr, got, want)
		}
	}
}
