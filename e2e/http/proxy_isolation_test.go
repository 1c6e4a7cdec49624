package http

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/e2e/e2etest"
)

// TestProxyClustersNeverSeeEachOther: two clusters' keys, over HTTP and
// over Kafka (SASL/PLAIN, user = cluster slug, password = API key), each
// see their own queue of the same name and never the other's.
func TestProxyClustersNeverSeeEachOther(t *testing.T) {
	bootKey, _ := newAPIKey(t)
	const token = "cp-token-isolation"
	c, base := proxyNode(t, bootKey, token, map[string]string{"QUEEN_KAFKA_SASL": "plain"})
	ctx := e2etest.Deadline(t, 45*time.Second)
	keys := map[string]string{}
	for _, slug := range []string{"alpha", "beta"} {
		key, hash := newAPIKey(t)
		keys[slug] = key
		if c := cp(t, ctx, base, token, "POST", "/api/cp/provision",
			provisionBody(slug, uuid.NewString(), hash, "pro", "produce", "consume", "read", "admin"), nil); c != http.StatusOK {
			t.Fatalf("provision %s: %d", slug, c)
		}
	}
	host := func(slug string) string { return slug + ".queen.example.com" }
	for slug, key := range keys {
		code, _, body := proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", bearer: key, host: host(slug),
			body: pushBody("shared-"+slug, `{"owner":"`+slug+`"}`, `"common"`)})
		if code != http.StatusCreated {
			t.Fatalf("push as %s: %d %s", slug, code, body)
		}
		code, _, body = proxyDo(t, ctx, base, proxyReq{method: "POST", path: "/api/v1/push", bearer: key, host: host(slug),
			body: pushBody("same-name", `"from `+slug+`"`)})
		if code != http.StatusCreated {
			t.Fatalf("push as %s: %d %s", slug, code, body)
		}
	}
	for slug, key := range keys {
		other := map[string]string{"alpha": "beta", "beta": "alpha"}[slug]
		_, _, list := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key, host: host(slug)})
		if !strings.Contains(list, "shared-"+slug) || strings.Contains(list, "shared-"+other) {
			t.Fatalf("%s lists: %s", slug, list)
		}
		code, _, popped := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/pop/queue/same-name?batch=10&wait=false", bearer: key, host: host(slug)})
		if code != http.StatusOK || !strings.Contains(popped, "from "+slug) || strings.Contains(popped, "from "+other) {
			t.Fatalf("%s pops: %d %s", slug, code, popped)
		}
		// Its key on the other's host is refused, not served there.
		code, _, body := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key, host: host(other)})
		if code != http.StatusForbidden || body != keyMismatchBody {
			t.Fatalf("%s's key on %s's host: %d %s", slug, other, code, body)
		}
	}

	// Kafka: the same isolation, the tenant from the key.
	as := func(slug, key string) kgo.Opt { return kgo.SASL(plain.Auth{User: slug, Pass: key}.AsMechanism()) }
	for slug, key := range keys {
		prod := e2etest.KgoClient(t, c, as(slug, key), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("events"))
		if err := prod.ProduceSync(ctx, kgo.StringRecord("kafka from "+slug)).FirstErr(); err != nil {
			t.Fatalf("produce as %s: %v", slug, err)
		}
	}
	for slug, key := range keys {
		cons := e2etest.KgoClient(t, c, as(slug, key), kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := e2etest.ConsumeN(ctx, t, cons, 1)
		if string(got[0].Value) != "kafka from "+slug {
			t.Fatalf("%s read %q over Kafka", slug, got[0].Value)
		}
		// The records are in the cluster's queue, as HTTP sees it too.
		_, _, list := proxyDo(t, ctx, base, proxyReq{method: "GET", path: "/api/v1/resources/queues", bearer: key, host: host(slug)})
		if !strings.Contains(list, `"events"`) {
			t.Fatalf("%s does not list its Kafka topic over HTTP: %s", slug, list)
		}
	}
	// A key logs in only as its own cluster.
	if err := e2etest.KafkaRefusal(t, c, as("beta", keys["alpha"])); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("alpha's key as beta: %v", err)
	}
	if err := e2etest.KafkaRefusal(t, c, as("alpha", bootKey[:len(bootKey)-1]+"A")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong key: %v", err)
	}
}
