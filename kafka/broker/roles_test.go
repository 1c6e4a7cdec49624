package broker

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/wire"
)

const testJWTSecret = "broker-test-secret-long-enough-for-hs256"

// startJWTNode starts a node whose SASL/PLAIN passwords are broker JWTs
// signed with testJWTSecret, accepted with no clock skew.
func startJWTNode(t *testing.T) *testNode {
	t.Helper()
	cfg := authn.DefaultConfig()
	cfg.Enabled, cfg.Secret, cfg.ClockSkew = true, testJWTSecret, 0
	v, err := authn.New(context.Background(), cfg, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return startNode(t, func(c *Config) { c.Listener.Authenticate = BrokerJWTs(v, false) })
}

// token signs a broker JWT with role, valid for ttl.
func token(t *testing.T, role string, ttl time.Duration) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "svc", "role": role, "exp": time.Now().Add(ttl).Unix(),
	}).SignedString([]byte(testJWTSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// as is a client of n logged in with a token of role.
func (n *testNode) as(role string, opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	auth := plain.Auth{User: "svc", Pass: token(n.t, role, time.Hour)}
	return n.client(append([]kgo.Opt{kgo.SASL(auth.AsMechanism()), kgo.RetryTimeout(time.Second)}, opts...)...)
}

// TestRolesOverTheWire: the access table holds for real requests, and
// automatic topic creation needs what CreateTopics needs.
func TestRolesOverTheWire(t *testing.T) {
	n := startJWTNode(t)
	admin := n.as("admin")
	// Metadata asking for creation: refused to roles that may not create
	// topics, with nothing created; done for admin.
	for _, role := range []string{"read-only", "write-only", "read-write"} {
		resp := metadata(t, n.as(role), true, "auto-"+role)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("%s: metadata with auto-creation answered %+v", role, resp.Topics)
		}
		if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "auto-"+role); ok {
			t.Fatalf("%s: metadata created a topic", role)
		}
		// Without asking, an unknown topic is just unknown.
		if resp := metadata(t, n.as(role), false, "auto-"+role); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%s: metadata without auto-creation answered %+v", role, resp.Topics)
		}
	}
	if resp := metadata(t, admin, true, "auto-admin"); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("admin: metadata with auto-creation answered %+v", resp.Topics)
	}
	// Producing to an unknown topic does not create it either.
	batch, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if p := rawProduce(t, n.as("write-only"), "produced-unknown", batch, -1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("write-only produce to an unknown topic: %s", kerr.ErrorForCode(p.ErrorCode))
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "produced-unknown"); ok {
		t.Fatal("a write-only produce created a topic")
	}
	if p := rawProduce(t, n.as("write-only"), "auto-admin", batch, -1); p.ErrorCode != 0 {
		t.Fatalf("write-only produce: %s", kerr.ErrorForCode(p.ErrorCode))
	}

	// Committing offsets moves the group's positions: read-write.
	commit := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = "g", -1, ""
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "auto-admin"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxFor(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(n.as("read-only")); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("read-only offset commit: %s", codeName(code))
	}
	if code := commit(n.as("read-write")); code != 0 {
		t.Fatalf("read-write offset commit: %s", codeName(code))
	}
	// A write-only producer may not move a group's offsets through a
	// transaction.
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.TransactionalID, txn.Group, txn.ProducerID, txn.ProducerEpoch = "t", "g", 1, 0
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "auto-admin"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Offset = 5
	tt.Partitions = append(tt.Partitions, tp)
	txn.Topics = append(txn.Topics, tt)
	resp, err := txn.RequestWith(ctxFor(t), n.as("write-only"))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("write-only TxnOffsetCommit: %s", codeName(code))
	}
}

// TestKgoReauthenticatesWithShortLivedTokens: with tokens living two
// seconds, a franz-go producer and consumer keep working over several
// lifetimes, re-authenticating on their connections (KIP-368: logins
// outnumber connections) rather than being cut off.
func TestKgoReauthenticatesWithShortLivedTokens(t *testing.T) {
	n := startJWTNode(t)
	createTopic(t, n.as("admin"), "short", 1)
	const ttl = 2 * time.Second
	var logins, connects atomic.Int64
	mech := plain.Plain(func(context.Context) (plain.Auth, error) {
		logins.Add(1)
		return plain.Auth{User: "svc", Pass: token(t, "read-write", ttl)}, nil
	})
	hook := connectCounter{&connects}
	prod := n.client(kgo.SASL(mech), kgo.WithHooks(hook), kgo.DefaultProduceTopic("short"))
	cons := n.client(kgo.SASL(mech), kgo.WithHooks(hook), kgo.ConsumeTopics("short"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxFor(t)
	sent := 0
	for start := time.Now(); time.Since(start) < 2*ttl || logins.Load()-connects.Load() < 3; sent++ {
		if ctx.Err() != nil {
			t.Fatalf("%d logins on %d connections: not re-authenticating", logins.Load(), connects.Load())
		}
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(sent))).FirstErr(); err != nil {
			t.Fatalf("produce %d, %s in: %v", sent, time.Since(start), err)
		}
		if got := consume(t, cons, 1); string(got[0].Value) != fmt.Sprint(sent) {
			t.Fatalf("consumed %q, want %d", got[0].Value, sent)
		}
	}
	t.Logf("%d records, %d logins on %d connections", sent, logins.Load(), connects.Load())
}

// connectCounter counts the connections a client opens.
type connectCounter struct{ n *atomic.Int64 }

func (c connectCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}
