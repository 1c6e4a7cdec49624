package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/e2e/harness"
)

// roundTrip produces one record to topic and reads it back.
func roundTrip(t *testing.T, c *harness.Cluster, topic string, opts ...kgo.Opt) error {
	t.Helper()
	ctx := deadline(t, 30*time.Second)
	prod := kgoClient(t, c, append([]kgo.Opt{kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic),
		kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err := prod.ProduceSync(ctx, kgo.StringRecord("secret")).FirstErr(); err != nil {
		return err
	}
	cons := kgoClient(t, c, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if got := consumeN(ctx, t, cons, 1); string(got[0].Value) != "secret" {
		t.Fatalf("read back %q", got[0].Value)
	}
	return nil
}

// refusal is the error of one Metadata request with no retries: what a
// client that may not connect gets.
func refusal(t *testing.T, c *harness.Cluster, opts ...kgo.Opt) error {
	t.Helper()
	cl := kgoClient(t, c, append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

func TestKafkaSASLPlain(t *testing.T) {
	c := startCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "alice:wonderland,bob:builder"}})
	right := kgo.SASL(plain.Auth{User: "alice", Pass: "wonderland"}.AsMechanism())
	if err := roundTrip(t, c, "sasl", right); err != nil {
		t.Fatal("right password:", err)
	}
	wrong := kgo.SASL(plain.Auth{User: "alice", Pass: "builder"}.AsMechanism())
	if err := refusal(t, c, wrong); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if !c.Nodes[0].Grep("SASL/PLAIN on a plaintext Kafka listener") {
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
	c := startCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_TLS_CERT": certFile, "QUEEN_KAFKA_TLS_KEY": keyFile,
		"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "alice:wonderland"}})
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	auth := kgo.SASL(plain.Auth{User: "alice", Pass: "wonderland"}.AsMechanism())
	if err := roundTrip(t, c, "tls", tlsOpt, auth); err != nil {
		t.Fatal("TLS with a trusted certificate:", err)
	}
	if err := refusal(t, c, auth); err == nil {
		t.Fatal("a plaintext client got through a TLS listener")
	}
	untrusted := kgo.DialTLSConfig(&tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12})
	if err := refusal(t, c, untrusted, auth); err == nil {
		t.Fatal("a client that does not trust the certificate got through")
	}
	if c.Nodes[0].Grep("SASL/PLAIN on a plaintext Kafka listener") {
		t.Fatal("plaintext warning with TLS on")
	}
}
