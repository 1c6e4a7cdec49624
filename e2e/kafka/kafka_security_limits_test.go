package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// rawKafka is a hand-driven Kafka connection, for what clients never do.
type rawKafka struct {
	t    *testing.T
	conn net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func dialKafka(t *testing.T, addr string) *rawKafka {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawKafka{t: t, conn: conn, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e-raw"))}
}

// roundTrip sends req (its version set) and decodes the response.
func (r *rawKafka) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.corr++
	r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.conn.Write(r.fmt.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		r.t.Fatalf("reading the %T answer: %v", req, err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.conn, frame); err != nil {
		r.t.Fatal(err)
	}
	resp := req.ResponseKind()
	body := frame[4:]
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// closedWithin reports whether the node closes the connection within d.
func (r *rawKafka) closedWithin(d time.Duration) bool {
	r.conn.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := r.conn.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestKafkaStalledFramesBeforeLogin: over a thousand connections that
// announce a 256 KiB frame and send nothing more, and some that send one
// byte of a smaller one, before logging in, do not stall a client that
// logs in. (They took the whole 256 MiB request budget.)
func TestKafkaStalledFramesBeforeLogin(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "alice:wonderland"}})
	addr := c.Nodes[0].KafkaAddr
	for i := range 1200 {
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { conn.Close() })
		stall := binary.BigEndian.AppendUint32(nil, 256<<10)
		if i >= 1100 {
			stall = append(binary.BigEndian.AppendUint32(nil, 60<<10), 0)
		}
		_, _ = conn.Write(stall) // the node may already have closed it
	}
	// From another loopback address: the stalled ones took their own
	// address's places before login.
	dialer := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	ctx := e2etest.Deadline(t, 20*time.Second)
	cl := e2etest.KgoClient(t, c, kgo.Dialer(dialer.DialContext), kgo.RetryTimeout(10*time.Second),
		kgo.SASL(plain.Auth{User: "alice", Pass: "wonderland"}.AsMechanism()))
	e2etest.CreateTopicOn(ctx, t, cl, "stalled", 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "stalled", Value: []byte("through")}).FirstErr(); err != nil {
		t.Fatal("a client that logs in while strangers stall:", err)
	}
	if !c.Nodes[0].Grep("kafka connection refused") {
		t.Fatal("no connection limit was reached")
	}
}

// TestKafkaRolesMatchHTTPLevels: over a real node, Metadata creates
// topics only for tokens that may create them, and committing a group's
// offsets (plainly or in a transaction) needs read-write.
func TestKafkaRolesMatchHTTPLevels(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "plain", "JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret}})
	exp := time.Now().Add(time.Hour).Unix()
	login := func(role string) *kgo.Client {
		auth := plain.Auth{User: "svc", Pass: e2etest.HS256Token(t, jwt.MapClaims{"sub": "svc", "role": role, "exp": exp})}
		return e2etest.KgoClient(t, c, kgo.SASL(auth.AsMechanism()), kgo.RetryTimeout(3*time.Second))
	}
	ctx := e2etest.Deadline(t, time.Minute)
	for _, role := range []string{"read-only", "write-only"} {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("made-by-" + role)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, login(role))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("%s: Metadata asking to create a topic answered %v", role, kerr.ErrorForCode(code))
		}
	}
	admin := login("admin")
	e2etest.CreateTopicOn(ctx, t, admin, "positions", 1)
	commit := func(cl *kgo.Client) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "g", -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "positions",
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err := commit(login("read-only")); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("read-only offset commit: %v", err)
	}
	if err := commit(login("read-write")); err != nil {
		t.Fatalf("read-write offset commit: %v", err)
	}
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.TransactionalID, txn.Group, txn.ProducerID = "t", "g", 1
	txn.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "positions",
		Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	resp, err := txn.RequestWith(ctx, login("write-only"))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("write-only TxnOffsetCommit answered %v", kerr.ErrorForCode(code))
	}
}

// TestKafkaSessionFollowsTokenExpiry: SaslAuthenticate tells the client how
// long its token has left, a raw connection that does not log in again is
// closed once it expired, and franz-go re-authenticates on its own and
// keeps working with tokens of a few seconds.
func TestKafkaSessionFollowsTokenExpiry(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "plain", "JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret, "JWT_CLOCK_SKEW": "0"}})
	tokenFor := func(ttl time.Duration) string {
		return e2etest.HS256Token(t, jwt.MapClaims{"sub": "svc", "role": "read-write", "exp": time.Now().Add(ttl).Unix()})
	}

	raw := dialKafka(t, c.Nodes[0].KafkaAddr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	raw.roundTrip(hs)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 1, []byte("\x00svc\x00"+tokenFor(2*time.Second))
	resp := raw.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > 2000 {
		t.Fatalf("authenticate: error %d, session lifetime %d ms", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	if !raw.closedWithin(15 * time.Second) {
		t.Fatal("the connection outlived its token")
	}
	if !c.Nodes[0].Grep("SASL session expired") {
		t.Fatal("no log line for the expired session")
	}

	ctx := e2etest.Deadline(t, time.Minute)
	const ttl = 3 * time.Second
	var logins, connects atomic.Int64
	mech := plain.Plain(func(context.Context) (plain.Auth, error) {
		logins.Add(1)
		return plain.Auth{User: "svc", Pass: tokenFor(ttl)}, nil
	})
	hook := connectHook{&connects}
	admin := e2etest.KgoClient(t, c, kgo.SASL(plain.Auth{User: "svc", Pass: e2etest.HS256Token(t, jwt.MapClaims{"role": "admin"})}.AsMechanism()))
	e2etest.CreateTopicOn(ctx, t, admin, "expiring", 1)
	prod := e2etest.KgoClient(t, c, kgo.SASL(mech), kgo.WithHooks(hook), kgo.DefaultProduceTopic("expiring"))
	cons := e2etest.KgoClient(t, c, kgo.SASL(mech), kgo.WithHooks(hook), kgo.ConsumeTopics("expiring"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	sent := 0
	for start := time.Now(); time.Since(start) < 2*ttl || logins.Load()-connects.Load() < 3; sent++ {
		if ctx.Err() != nil {
			t.Fatalf("%d logins on %d connections: not re-authenticating", logins.Load(), connects.Load())
		}
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(sent))).FirstErr(); err != nil {
			t.Fatalf("produce %d after %s: %v", sent, time.Since(start), err)
		}
		if got := e2etest.ConsumeN(ctx, t, cons, 1); string(got[0].Value) != fmt.Sprint(sent) {
			t.Fatalf("consumed %q, want %d", got[0].Value, sent)
		}
	}
	t.Logf("%d records, %d logins on %d connections", sent, logins.Load(), connects.Load())
}

// connectHook counts the connections a franz-go client opens.
type connectHook struct{ n *atomic.Int64 }

func (h connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.n.Add(1)
	}
}
