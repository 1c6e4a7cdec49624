package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// selfSignedCert makes a certificate for localhost and 127.0.0.1 and the
// pool that trusts it.
func selfSignedCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "queen test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func TestTLSWithKgo(t *testing.T) {
	cert, pool := selfSignedCert(t)
	sni := make(chan string, 4)
	s := startServer(t, Config{
		TLS:          &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Authenticate: tenantAuthenticator,
	}, func(s *Server) {
		must(t, s.RegisterHandler(3, func(ctx context.Context, c *Conn, kreq kmsg.Request) (kmsg.Response, error) {
			if st, ok := c.TLSConnectionState(); ok {
				sni <- st.ServerName
			}
			return kreq.ResponseKind(), nil
		}))
	})
	cl := newKgoClient(t, s,
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		t.Fatalf("%d seed brokers", len(seeds))
	}
	// kgo fills the software name only on its own handshake; Kafka, like
	// queen, refuses an empty one with INVALID_REQUEST.
	kresp, err := seeds[0].Request(ctx, apiVersionsRequest(3))
	if err != nil {
		t.Fatalf("ApiVersions over TLS: %v", err)
	}
	resp := kresp.(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != 4 { // 3, 17, 18, 36
		t.Fatalf("ApiVersions over TLS: %+v", resp)
	}
	if _, err := seeds[0].Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("Metadata over TLS+SASL: %v", err)
	}
	if got := within(t, sni); got != "localhost" {
		t.Fatalf("SNI %q", got)
	}

	// A plaintext client gets nowhere and the server shrugs it off.
	plainConn := dialRaw(t, s)
	plainConn.writeRaw(kmsg.NewRequestFormatter().AppendRequest(nil, apiVersionsRequest(3), 1))
	plainConn.expectClosed()
}
