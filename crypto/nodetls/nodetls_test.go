package nodetls_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
)

func issue(t *testing.T, ca *nodetlstest.CA, l nodetlstest.Leaf) (string, string) {
	t.Helper()
	c, k, err := ca.Issue(filepath.Dir(ca.CertPEM), l)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func TestLoadOffWhenNothingSet(t *testing.T) {
	c, err := nodetls.Load(nodetls.Files{})
	if err != nil || c != nil {
		t.Fatalf("Load of nothing: %v %v", c, err)
	}
	if c.Mode() != "off" || c.Mutual() {
		t.Fatalf("nil config mode %q", c.Mode())
	}
}

func TestLoadModes(t *testing.T) {
	dir := t.TempDir()
	ca, err := nodetlstest.NewCA(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	cert, key := issue(t, ca, nodetlstest.Leaf{Name: "n1"})
	c, err := nodetls.Load(nodetls.Files{Cert: cert, Key: key})
	if err != nil || c.Mode() != "server-only" || c.Server().ClientAuth != tls.NoClientCert || len(c.Client().Certificates) != 0 {
		t.Fatalf("cert and key: %v %v", c.Mode(), err)
	}
	c, err = nodetls.Load(nodetls.Files{Cert: cert, Key: key, CA: ca.CertPEM})
	if err != nil || c.Mode() != "mutual" || !c.Mutual() {
		t.Fatalf("with CA: %v", err)
	}
	if s := c.Server(); s.ClientAuth != tls.RequireAndVerifyClientCert || s.ClientCAs == nil || s.MinVersion < tls.VersionTLS12 {
		t.Fatalf("mutual server config: %+v", s)
	}
	if cl := c.Client(); len(cl.Certificates) != 1 || cl.RootCAs == nil {
		t.Fatalf("mutual client config: %+v", cl)
	}
	if !strings.Contains(c.Subject(), "n1") || time.Until(c.NotAfter()) < time.Hour {
		t.Fatalf("subject %q not after %v", c.Subject(), c.NotAfter())
	}
}

// Every half or broken configuration is refused with one line naming the
// variable to fix.
func TestLoadRefusesHalfConfigurations(t *testing.T) {
	dir := t.TempDir()
	ca, err := nodetlstest.NewCA(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	other, err := nodetlstest.NewCA(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	cert, key := issue(t, ca, nodetlstest.Leaf{Name: "n1"})
	_, otherKey := issue(t, ca, nodetlstest.Leaf{Name: "n2"})
	serverOnly, serverOnlyKey := issue(t, ca, nodetlstest.Leaf{Name: "srv", Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		f    nodetls.Files
		want string
	}{
		{"cert without key", nodetls.Files{Cert: cert}, "QUEEN_RAFT_TLS_CERT: is set without QUEEN_RAFT_TLS_KEY"},
		{"key without cert", nodetls.Files{Key: key}, "QUEEN_RAFT_TLS_KEY: is set without QUEEN_RAFT_TLS_CERT"},
		{"CA alone", nodetls.Files{CA: ca.CertPEM}, "QUEEN_RAFT_TLS_CA: is set without"},
		{"cert unreadable", nodetls.Files{Cert: missing, Key: key}, "QUEEN_RAFT_TLS_CERT: cannot load"},
		{"key of another cert", nodetls.Files{Cert: cert, Key: otherKey}, "QUEEN_RAFT_TLS_CERT: cannot load"},
		{"CA unreadable", nodetls.Files{Cert: cert, Key: key, CA: missing}, "QUEEN_RAFT_TLS_CA:"},
		{"CA not PEM", nodetls.Files{Cert: cert, Key: key, CA: empty}, "holds no PEM certificate"},
		{"cert from another CA", nodetls.Files{Cert: cert, Key: key, CA: other.CertPEM}, "is not accepted by QUEEN_RAFT_TLS_CA"},
		{"server use only", nodetls.Files{Cert: serverOnly, Key: serverOnlyKey, CA: ca.CertPEM}, "serverAuth and clientAuth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := nodetls.Load(tc.f)
			if err == nil || c != nil {
				t.Fatalf("loaded: %v", c.Mode())
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line containing %q", err, tc.want)
			}
		})
	}
}

// The loaded configs talk to each other, and refuse a client without a
// certificate or with one from another CA.
func TestMutualHandshake(t *testing.T) {
	dir := t.TempDir()
	ca, _ := nodetlstest.NewCA(dir, "cluster")
	other, _ := nodetlstest.NewCA(dir, "other")
	load := func(ca *nodetlstest.CA, name string) *nodetls.Config {
		cert, key := issue(t, ca, nodetlstest.Leaf{Name: name})
		c, err := nodetls.Load(nodetls.Files{Cert: cert, Key: key, CA: ca.CertPEM})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srvCfg := load(ca, "server")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = srvCfg.Server()
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	url := "https://127.0.0.1:" + port + "/"

	get := func(cl *tls.Config) error {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cl}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(load(ca, "peer").Client()); err != nil {
		t.Fatalf("a peer of the same CA: %v", err)
	}
	noCert := load(ca, "nocert").Client()
	noCert.Certificates = nil
	if err := get(noCert); err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	// The stranger trusts the server; only the server's check can refuse it.
	stranger := load(other, "stranger").Client()
	stranger.RootCAs = srvCfg.Client().RootCAs
	if err := get(stranger); err == nil {
		t.Fatal("a client from another CA was accepted")
	}
}
