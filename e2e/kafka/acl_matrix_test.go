package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The ACL matrix (issue 36): one principal, the same on both doors — a
// broker JWT whose sub is alice, as a bearer token over HTTP and as the
// OAUTHBEARER token over Kafka, both User:alice — driven through HTTP
// push/pop and Kafka produce/fetch on a real node with QUEEN_ACLS=true.

// aclEnv is a node with JWT on both doors and ACLs on, User:root its
// super user.
func aclEnv() map[string]string {
	return map[string]string{
		"JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret, "QUEEN_KAFKA_SASL": "oauthbearer",
		"QUEEN_ACLS": "true", "QUEEN_ACL_SUPER_USERS": "User:root",
	}
}

func jwtOf(t *testing.T, sub, role string) string {
	return e2etest.HS256Token(t, jwt.MapClaims{"sub": sub, "role": role, "exp": time.Now().Add(time.Hour).Unix()})
}

// httpAs sends one request with a bearer token; a transport error fails t.
func httpAs(ctx context.Context, t *testing.T, method, url, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := e2etest.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// aclBinding is one binding as POST /api/v1/system/acls takes it.
func aclBinding(res, name, pattern, principal, op, perm string) map[string]string {
	return map[string]string{"resourceType": res, "resourceName": name, "patternType": pattern,
		"principal": principal, "operation": op, "permission": perm}
}

func createACLs(ctx context.Context, t *testing.T, base, root string, bs ...map[string]string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"acls": bs})
	if code, resp := httpAs(ctx, t, "POST", base+"/api/v1/system/acls", root, string(body)); code != http.StatusCreated {
		t.Fatalf("create ACLs: %d %s", code, resp)
	}
}

// kafkaAs is a franz-go client logged in with tok over OAUTHBEARER, not
// idempotent (an idempotent producer id is a cluster permission this
// matrix is not about) and quick to give up on a refusal.
func kafkaAs(t *testing.T, c *harness.Cluster, tok string) *kgo.Client {
	return e2etest.KgoClient(t, c, kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()), kgo.DisableIdempotentWrite(),
		kgo.RecordDeliveryTimeout(15*time.Second), kgo.RequestRetries(2))
}

// kafkaProduce produces one record to topic and answers the error.
func kafkaProduce(ctx context.Context, cl *kgo.Client, topic string) error {
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// kafkaFetch reads topic's partition 0 from the start until a record or
// an error comes, or the deadline.
func kafkaFetch(ctx context.Context, t *testing.T, c *harness.Cluster, tok, topic string) error {
	cl := e2etest.KgoClient(t, c, kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()), kgo.RequestRetries(2),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			return errs[0].Err
		}
		if fs.NumRecords() > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func TestACLMatrixBothDoors(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: aclEnv()})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	base := c.Nodes[0].URL()
	root, alice := jwtOf(t, "root", "admin"), jwtOf(t, "alice", "read-write")
	reader := jwtOf(t, "reader", "read-only")

	// The topics exist first (over Kafka only an admin creates them).
	for _, q := range []string{"orders.x", "orders.secret", "payments.x"} {
		if code, body := httpAs(ctx, t, "POST", base+"/api/v1/push", root, `{"items":[{"queue":"`+q+`","payload":0}]}`); code != http.StatusCreated {
			t.Fatalf("root push %s: %d %s", q, code, body)
		}
	}
	createACLs(ctx, t, base, root,
		aclBinding("topic", "orders.", "prefixed", "User:alice", "write", "allow"),
		aclBinding("topic", "orders.", "prefixed", "User:alice", "read", "allow"),
		aclBinding("group", "__QUEUE_MODE__", "literal", "User:alice", "read", "allow"),
		aclBinding("topic", "orders.secret", "literal", "User:alice", "all", "deny"),
		aclBinding("topic", "*", "literal", "User:reader", "write", "allow"),
		aclBinding("topic", "*", "literal", "User:reader", "read", "allow"),
	)
	aliceKafka := kafkaAs(t, c, alice)

	// (a) allowed by the prefixed ALLOW on orders.: both doors.
	if code, body := httpAs(ctx, t, "POST", base+"/api/v1/push", alice, `{"items":[{"queue":"orders.x","payload":1}]}`); code != http.StatusCreated {
		t.Fatalf("(a) HTTP push orders.x: %d %s", code, body)
	}
	if code, body := httpAs(ctx, t, "GET", base+"/api/v1/pop/queue/orders.x?batch=1", alice, ""); code != http.StatusOK {
		t.Fatalf("(a) HTTP pop orders.x: %d %s", code, body)
	}
	if err := kafkaProduce(ctx, aliceKafka, "orders.x"); err != nil {
		t.Fatalf("(a) Kafka produce orders.x: %v", err)
	}
	if err := kafkaFetch(ctx, t, c, alice, "orders.x"); err != nil {
		t.Fatalf("(a) Kafka fetch orders.x: %v", err)
	}

	// (b) denied by prefix: no ACL names payments.
	// (c) the DENY on orders.secret beats the prefixed ALLOW.
	for what, topic := range map[string]string{"(b)": "payments.x", "(c)": "orders.secret"} {
		code, body := httpAs(ctx, t, "POST", base+"/api/v1/push", alice, `{"items":[{"queue":"`+topic+`","payload":1}]}`)
		if code != http.StatusForbidden || !strings.Contains(body, `"code":"acl_denied"`) {
			t.Fatalf("%s HTTP push %s: %d %s", what, topic, code, body)
		}
		code, body = httpAs(ctx, t, "GET", base+"/api/v1/pop/queue/"+topic, alice, "")
		if code != http.StatusForbidden || !strings.Contains(body, `"code":"acl_denied"`) {
			t.Fatalf("%s HTTP pop %s: %d %s", what, topic, code, body)
		}
		if err := kafkaProduce(ctx, aliceKafka, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s Kafka produce %s: %v, want TOPIC_AUTHORIZATION_FAILED", what, topic, err)
		}
		if err := kafkaFetch(ctx, t, c, alice, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s Kafka fetch %s: %v, want TOPIC_AUTHORIZATION_FAILED", what, topic, err)
		}
	}

	// (d) the JWT role is a ceiling: read-only with a WRITE ACL on every
	// topic still may not push or produce, and may read.
	code, body := httpAs(ctx, t, "POST", base+"/api/v1/push", reader, `{"items":[{"queue":"orders.x","payload":1}]}`)
	if code != http.StatusForbidden || !strings.Contains(body, `"code":"forbidden"`) {
		t.Fatalf("(d) HTTP push as read-only: %d %s", code, body)
	}
	if err := kafkaProduce(ctx, kafkaAs(t, c, reader), "orders.x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("(d) Kafka produce as read-only: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := kafkaFetch(ctx, t, c, reader, "orders.x"); err != nil {
		t.Fatalf("(d) Kafka fetch as read-only with READ: %v", err)
	}

	// Nothing refused was written: payments.x and orders.secret hold only
	// root's first record.
	for _, q := range []string{"payments.x", "orders.secret"} {
		code, body := httpAs(ctx, t, "POST", base+"/api/v1/fetch", root,
			`{"entries":[{"queue":"`+q+`","partition":"Default","offset":0}]}`)
		var out struct {
			Entries []struct{ HighWatermark uint64 }
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || len(out.Entries) != 1 || out.Entries[0].HighWatermark != 1 {
			t.Fatalf("%s after refusals: %d %s, want one record", q, code, body)
		}
	}
}
