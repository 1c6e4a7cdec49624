package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A queue over LagPartitionsMax partitions gets its group's lag per queue
// only; a smaller one per partition too; the collapsed queues are counted;
// the whole scrape is valid Prometheus text.
func TestLagPerPartitionIsBoundedPerQueue(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) { c.LagPartitionsMax = 2 })
	for queue, parts := range map[string][]string{"narrow": {"a", "b"}, "wide": {"a", "b", "c"}} {
		var items []string
		for _, p := range parts {
			for i := 0; i < 3; i++ {
				items = append(items, fmt.Sprintf(`{"queue":%q,"partition":%q,"payload":{"i":%d}}`, queue, p, i))
			}
		}
		if code, body := call(t, "POST", n.url+"/api/v1/push", "", `{"items":[`+strings.Join(items, ",")+`]}`); code != http.StatusCreated {
			t.Fatalf("push %s: %d %s", queue, code, body)
		}
		for _, p := range parts {
			url := fmt.Sprintf("%s/api/v1/pop/queue/%s/partition/%s?consumerGroup=audit&batch=1&subscriptionMode=all&autoAck=true", n.url, queue, p)
			if code, body := call(t, "GET", url, "", ""); code != http.StatusOK {
				t.Fatalf("pop %s/%s: %d %s", queue, p, code, body)
			}
		}
	}
	code, body := call(t, "GET", n.url+"/metrics/prometheus", "", "")
	if code != http.StatusOK {
		t.Fatalf("scrape: %d", code)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
		t.Fatalf("not Prometheus text: %v", err)
	}
	for _, want := range []string{
		`queen_consumer_group_lag_messages{tenant="00000000-0000-0000-0000-000000000001",queue="narrow",group="audit"} 4`,
		`queen_consumer_group_lag_messages{tenant="00000000-0000-0000-0000-000000000001",queue="wide",group="audit"} 6`,
		`queen_consumer_group_partition_lag_messages{tenant="00000000-0000-0000-0000-000000000001",queue="narrow",partition="a",group="audit"} 2`,
		`queen_consumer_group_partition_lag_messages{tenant="00000000-0000-0000-0000-000000000001",queue="narrow",partition="b",group="audit"} 2`,
		"queen_consumer_group_lag_collapsed_queues 1",
		"queen_http_pop_messages_total 5",
		"queen_http_push_messages_total 15",
	} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(body, `queen_consumer_group_partition_lag_messages{tenant="00000000-0000-0000-0000-000000000001",queue="wide"`) {
		t.Error("a queue over the partition bound has per-partition lag series")
	}
}

// The library leaves HELP empty; addHelp fills in ours and leaves the rest.
func TestAddHelpFillsTheLibrarysEmptyHelp(t *testing.T) {
	in := "# HELP queen_http_push_messages_total\n# TYPE queen_http_push_messages_total counter\nqueen_http_push_messages_total 3\n# HELP go_goroutines\n"
	var out bytes.Buffer
	addHelp(&out, []byte(in))
	want := "# HELP queen_http_push_messages_total " + familyHelp["queen_http_push_messages_total"] +
		"\n# TYPE queen_http_push_messages_total counter\nqueen_http_push_messages_total 3\n# HELP go_goroutines " + helpOf("go_goroutines") + "\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// observe runs on every request: a route answering a mix of statuses.
func BenchmarkRouteMetricsObserve(b *testing.B) {
	m := newRouteMetrics(metrics.NewSet(), "queen_http", route{method: get, path: "/api/v1/pop/queue/{queue}"})
	statuses := []int{200, 204, 200, 200}
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.observe(statuses[i&3], start)
			i++
		}
	})
}

// Each status a route answers has its own counter, the same series however
// often it is counted.
func TestRouteMetricsCountPerStatus(t *testing.T) {
	set := metrics.NewSet()
	m := newRouteMetrics(set, "queen_http", route{method: get, path: "/x"})
	for _, status := range []int{200, 404, 200} {
		m.observe(status, time.Now())
	}
	var out bytes.Buffer
	set.WritePrometheus(&out)
	for _, want := range []string{`queen_http_requests_total{method="GET",route="/x",status="200"} 2`,
		`queen_http_requests_total{method="GET",route="/x",status="404"} 1`} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("no %s in\n%s", want, out.String())
		}
	}
}

// A scrape writes a sample per queue and family: 10,000 samples.
func BenchmarkPromTextSamples(b *testing.B) {
	var buf bytes.Buffer
	p := promText{b: &buf}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		for j := uint64(0); j < 10000; j++ {
			p.value("queen_queue_messages_in_total", `{tenant="00000000-0000-0000-0000-000000000001",queue="q"}`, j)
		}
	}
}
