package kafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// roundTrip produces one record to topic and reads it back.
func roundTrip(t *testing.T, c *harness.Cluster, topic string, opts ...kgo.Opt) error {
	t.Helper()
	ctx := e2etest.Deadline(t, 30*time.Second)
	prod := e2etest.KgoClient(t, c, append([]kgo.Opt{kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic),
		kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err := prod.ProduceSync(ctx, kgo.StringRecord("secret")).FirstErr(); err != nil {
		return err
	}
	cons := e2etest.KgoClient(t, c, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if got := e2etest.ConsumeN(ctx, t, cons, 1); string(got[0].Value) != "secret" {
		t.Fatalf("read back %q", got[0].Value)
	}
	return nil
}

func TestKafkaSASLPlain(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "alice:wonderland,bob:builder"}})
	right := kgo.SASL(plain.Auth{User: "alice", Pass: "wonderland"}.AsMechanism())
	if err := roundTrip(t, c, "sasl", right); err != nil {
		t.Fatal("right password:", err)
	}
	wrong := kgo.SASL(plain.Auth{User: "alice", Pass: "builder"}.AsMechanism())
	if err := e2etest.KafkaRefusal(t, c, wrong); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if !c.Nodes[0].Grep("on a plaintext Kafka listener sends passwords") {
		t.Fatal("no boot warning for SASL over plaintext")
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key as
// PEM files and returns their paths and a pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "queen e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestKafkaTLSWithSASL(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_TLS_CERT": certFile, "QUEEN_KAFKA_TLS_KEY": keyFile,
		"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "alice:wonderland"}})
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	auth := kgo.SASL(plain.Auth{User: "alice", Pass: "wonderland"}.AsMechanism())
	if err := roundTrip(t, c, "tls", tlsOpt, auth); err != nil {
		t.Fatal("TLS with a trusted certificate:", err)
	}
	if err := e2etest.KafkaRefusal(t, c, auth); err == nil {
		t.Fatal("a plaintext client got through a TLS listener")
	}
	untrusted := kgo.DialTLSConfig(&tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12})
	if err := e2etest.KafkaRefusal(t, c, untrusted, auth); err == nil {
		t.Fatal("a client that does not trust the certificate got through")
	}
	if c.Nodes[0].Grep("on a plaintext Kafka listener sends passwords") {
		t.Fatal("plaintext warning with TLS on")
	}
}

// TestKafkaSASLWithBrokerJWTRoles: with JWT on, the SASL password is a
// broker JWT and its roles limit the connection as on HTTP.
func TestKafkaSASLWithBrokerJWTRoles(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "plain", "JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret}})
	exp := time.Now().Add(time.Hour).Unix()
	login := func(role string) kgo.Opt {
		return kgo.SASL(plain.Auth{User: "svc", Pass: e2etest.HS256Token(t, jwt.MapClaims{"sub": "svc", "role": role, "exp": exp})}.AsMechanism())
	}
	ctx := e2etest.Deadline(t, time.Minute)
	// An admin creates the topic; a write-only producer may produce but
	// not fetch; a read-only consumer may fetch but not produce.
	admin := e2etest.KgoClient(t, c, login("admin"))
	e2etest.CreateTopicOn(ctx, t, admin, "roles", 1)
	writer := e2etest.KgoClient(t, c, login("write-only"), kgo.DefaultProduceTopic("roles"), kgo.RetryTimeout(3*time.Second))
	if err := writer.ProduceSync(ctx, kgo.StringRecord("from the writer")).FirstErr(); err != nil {
		t.Fatal("write-only produce:", err)
	}
	reader := e2etest.KgoClient(t, c, login("read-only"), kgo.DefaultProduceTopic("roles"), kgo.RetryTimeout(3*time.Second),
		kgo.ConsumeTopics("roles"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if got := e2etest.ConsumeN(ctx, t, reader, 1); string(got[0].Value) != "from the writer" {
		t.Fatalf("read-only fetch: %q", got[0].Value)
	}
	// franz-go asks for an idempotent producer id first, which is refused.
	if err := reader.ProduceSync(ctx, kgo.StringRecord("not allowed")).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("read-only produce: %v", err)
	}
	plainReader := e2etest.KgoClient(t, c, login("read-only"), kgo.DefaultProduceTopic("roles"), kgo.RetryTimeout(3*time.Second), kgo.DisableIdempotentWrite())
	if err := plainReader.ProduceSync(ctx, kgo.StringRecord("not allowed")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("read-only produce without idempotence: %v", err)
	}
	fetchReq := kmsg.NewPtrFetchRequest()
	fetchReq.MaxWaitMillis, fetchReq.MaxBytes = 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "roles"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetchReq.Topics = append(fetchReq.Topics, ft)
	resp, err := fetchReq.RequestWith(ctx, writer)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("write-only fetch answered error %d", code)
	}
	// A token that does not verify is refused at login.
	bad := kgo.SASL(plain.Auth{User: "svc", Pass: "not-a-token"}.AsMechanism())
	if err := e2etest.KafkaRefusal(t, c, bad); err == nil {
		t.Fatal("a bad token logged in")
	}
}

// TestKafkaTenantsFromSASLAreIsolated: in tenancy mode the SASL user name
// is the tenant; same-named topics of two tenants never mix, over Kafka or
// over HTTP with the tenant header.
func TestKafkaTenantsFromSASLAreIsolated(t *testing.T) {
	a, b := "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c", "0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b"
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Groups: 2, Env: map[string]string{
		"QUEEN_TENANCY_HEADER": "true", "QUEEN_KV_TRUSTED_PROXY": "1",
		"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": a + ":pa," + b + ":pb"}})
	ctx := e2etest.Deadline(t, time.Minute)
	as := func(tenant, pass string) kgo.Opt { return kgo.SASL(plain.Auth{User: tenant, Pass: pass}.AsMechanism()) }
	for _, tn := range []struct{ tenant, pass string }{{a, "pa"}, {b, "pb"}} {
		prod := e2etest.KgoClient(t, c, as(tn.tenant, tn.pass), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("orders"))
		if err := prod.ProduceSync(ctx, kgo.StringRecord("for "+tn.tenant)).FirstErr(); err != nil {
			t.Fatalf("produce as %s: %v", tn.tenant, err)
		}
	}
	for _, tn := range []struct{ tenant, pass string }{{a, "pa"}, {b, "pb"}} {
		cons := e2etest.KgoClient(t, c, as(tn.tenant, tn.pass), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := e2etest.ConsumeN(ctx, t, cons, 1)
		if string(got[0].Value) != "for "+tn.tenant {
			t.Fatalf("tenant %s read %q", tn.tenant, got[0].Value)
		}
		// Over HTTP, the tenant header reaches the same queue.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.Nodes[0].URL()+"/api/v1/fetch",
			strings.NewReader(`{"entries":[{"queue":"orders","partition":"0","offset":0}]}`))
		req.Header.Set("x-queen-tenant", tn.tenant)
		resp, err := e2etest.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "for "+tn.tenant) || strings.Count(string(body), `"offset"`) != 1 {
			t.Fatalf("HTTP fetch as %s: %s", tn.tenant, body)
		}
	}
	// A user name that is not a tenant UUID cannot log in in tenancy mode.
	c2users := kgo.SASL(plain.Auth{User: "alice", Pass: "pa"}.AsMechanism())
	if err := e2etest.KafkaRefusal(t, c, c2users); err == nil {
		t.Fatal("a non-UUID user logged in in tenancy mode")
	}
}

// TestKafkaJWTLoginIsBoundToTheTokensTenant: in tenancy mode with broker
// JWT, a token only logs in as the tenant its tenant claim names, and the
// public metrics do not list tenant ids (the review's attack: read a
// tenant id from /metrics/prometheus, log in as it with any valid token).
func TestKafkaJWTLoginIsBoundToTheTokensTenant(t *testing.T) {
	a, b := "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c", "0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b"
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_TENANCY_HEADER": "true", "QUEEN_KV_TRUSTED_PROXY": "1",
		"QUEEN_KAFKA_SASL": "plain", "JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret}})
	ctx := e2etest.Deadline(t, time.Minute)
	exp := time.Now().Add(time.Hour).Unix()
	tokenOf := func(tenant string) string {
		return e2etest.HS256Token(t, jwt.MapClaims{"sub": "svc", "role": "admin", "tenant": tenant, "exp": exp})
	}
	as := func(user, tenant string) kgo.Opt {
		return kgo.SASL(plain.Auth{User: user, Pass: tokenOf(tenant)}.AsMechanism())
	}
	prod := e2etest.KgoClient(t, c, as(b, b), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("payroll"))
	if err := prod.ProduceSync(ctx, kgo.StringRecord("b's secret")).FirstErr(); err != nil {
		t.Fatalf("produce as B: %v", err)
	}
	scrape := func(tok string) string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Nodes[0].URL()+"/metrics/prometheus", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := e2etest.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if strings.Contains(scrape(""), b) {
		t.Fatal("the public scrape names tenant B")
	}
	// Every tenant's queues are the operator's to scrape (an admin token
	// naming no tenant), never another tenant's admin's.
	if strings.Contains(scrape(tokenOf(a)), b) {
		t.Fatal("tenant A's admin scrape names tenant B")
	}
	operator := e2etest.HS256Token(t, jwt.MapClaims{"sub": "ops", "role": "admin", "exp": exp})
	if !strings.Contains(scrape(operator), b) {
		t.Fatal("the operator's scrape does not name tenant B")
	}
	if err := e2etest.KafkaRefusal(t, c, as(b, a)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("A's token logging in as B: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	noTenant := kgo.SASL(plain.Auth{User: b, Pass: e2etest.HS256Token(t, jwt.MapClaims{"role": "admin", "exp": exp})}.AsMechanism())
	if err := e2etest.KafkaRefusal(t, c, noTenant); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a token naming no tenant logging in as B: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := e2etest.KafkaRefusal(t, c, as(a, a)); err != nil {
		t.Fatalf("A as A: %v", err)
	}
}

// TestJWTWithAnOpenKafkaPortRefusesToBoot: JWT_ENABLED=true without
// QUEEN_KAFKA_SASL would leave the Kafka port open to anyone; the node
// stops and says how to proceed.
func TestJWTWithAnOpenKafkaPortRefusesToBoot(t *testing.T) {
	c, err := harness.NewCluster(e2etest.QueenBinary(t), harness.Options{Nodes: 1, BaseDir: t.TempDir(),
		Env: map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	n := c.Nodes[0]
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	ctx := e2etest.Deadline(t, 30*time.Second)
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return !n.Running(), nil }); err != nil {
		t.Fatal("the node kept running with an open Kafka port")
	}
	if n.ExitCode() == 0 || !n.Grep("QUEEN_KAFKA_ALLOW_ANONYMOUS=true") {
		t.Fatalf("exit %d, log:\n%s", n.ExitCode(), n.Log())
	}
}
