// Package nodetls loads the TLS settings nodes use between themselves: on
// every raft listener (each group's, which also carries the clock route)
// and on every node-to-node HTTP call (QUEEN_RAFT_TLS_CERT, _KEY, _CA).
//
// With a CA the TLS is mutual: each node presents its certificate both as
// a server and as a client, and accepts a peer only if the peer's
// certificate chains to that CA. Without a CA a node presents its
// certificate as a server only and checks the peers' against the system
// roots; who may talk raft is then decided by QUEEN_RAFT_TOKEN alone.
//
// Files are read once at boot: a certificate is rotated by a rolling
// restart (docs/operations.md, "TLS between nodes").
package nodetls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// Files names the PEM files, as the environment gives them.
type Files struct {
	Cert, Key, CA string
}

// Config is the loaded TLS between nodes. A nil *Config means plaintext.
type Config struct {
	files  Files
	cert   tls.Certificate
	leaf   *x509.Certificate
	roots  *x509.CertPool // the CA; nil: system roots, no client certificates
	mutual bool
}

// Load reads the files. All three empty means no TLS (nil, nil). A
// certificate without its key, a CA without a certificate, or a file that
// cannot be read or parsed is an error naming its variable: a half
// configuration must stop the boot, not run in plaintext.
func Load(f Files) (*Config, error) {
	if f == (Files{}) {
		return nil, nil
	}
	switch {
	case f.Cert == "" && f.Key == "":
		return nil, errors.New("QUEEN_RAFT_TLS_CA: is set without QUEEN_RAFT_TLS_CERT and QUEEN_RAFT_TLS_KEY; a node must present a certificate to its peers")
	case f.Cert == "":
		return nil, errors.New("QUEEN_RAFT_TLS_KEY: is set without QUEEN_RAFT_TLS_CERT; set both or neither")
	case f.Key == "":
		return nil, errors.New("QUEEN_RAFT_TLS_CERT: is set without QUEEN_RAFT_TLS_KEY; set both or neither")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("QUEEN_RAFT_TLS_CERT: cannot load %s with key %s: %w", f.Cert, f.Key, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("QUEEN_RAFT_TLS_CERT: %s: %w", f.Cert, err)
	}
	cert.Leaf = leaf
	c := &Config{files: f, cert: cert, leaf: leaf}
	if f.CA == "" {
		return c, nil
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("QUEEN_RAFT_TLS_CA: %w", err)
	}
	c.roots = x509.NewCertPool()
	if !c.roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("QUEEN_RAFT_TLS_CA: %s holds no PEM certificate", f.CA)
	}
	c.mutual = true
	// Each node is both a server and a client to its peers, so its own
	// certificate must pass the checks its peers will make; finding out
	// here is one clear line instead of every peer refusing it.
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("QUEEN_RAFT_TLS_CERT: %s is not accepted by QUEEN_RAFT_TLS_CA %s (it needs both server and client use): %w", f.Cert, f.CA, err)
	}
	if err := checkUsages(leaf); err != nil {
		return nil, fmt.Errorf("QUEEN_RAFT_TLS_CERT: %s: %w", f.Cert, err)
	}
	return c, nil
}

// checkUsages refuses a certificate usable for one side only: Verify with
// two usages passes if either chains, but peers check each side alone.
func checkUsages(leaf *x509.Certificate) error {
	if len(leaf.ExtKeyUsage) == 0 {
		return nil // no restriction
	}
	var server, client bool
	for _, u := range leaf.ExtKeyUsage {
		server = server || u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny
		client = client || u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny
	}
	if !server || !client {
		return errors.New("its extended key usage must allow both serverAuth and clientAuth: every node is a server and a client to its peers")
	}
	return nil
}

// Mutual reports whether peers must present certificates (a CA is set).
func (c *Config) Mutual() bool { return c != nil && c.mutual }

// Mode is the boot log's description: "off", "server-only" or "mutual".
func (c *Config) Mode() string {
	switch {
	case c == nil:
		return "off"
	case c.mutual:
		return "mutual"
	}
	return "server-only"
}

// Files returns the paths loaded (for the boot log; they are not secret).
func (c *Config) Files() Files {
	if c == nil {
		return Files{}
	}
	return c.files
}

// NotAfter is when this node's certificate expires.
func (c *Config) NotAfter() time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.leaf.NotAfter
}

// Subject names this node's certificate (for the boot log).
func (c *Config) Subject() string {
	if c == nil {
		return ""
	}
	return c.leaf.Subject.String()
}

// Server is the configuration of a listener between nodes. HTTP/1.1 only:
// the raft stream is a full-duplex HTTP/1.1 request.
func (c *Config) Server() *tls.Config {
	s := &tls.Config{
		Certificates: []tls.Certificate{c.cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
	if c.mutual {
		s.ClientAuth = tls.RequireAndVerifyClientCert
		s.ClientCAs = c.roots
	}
	return s
}

// Client is the configuration of a call to a peer: the peer's certificate
// must chain to the CA (or the system roots) and name the host it was
// dialled at; with a CA this node presents its own certificate.
func (c *Config) Client() *tls.Config {
	cl := &tls.Config{
		RootCAs:    c.roots,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	}
	if c.mutual {
		cl.Certificates = []tls.Certificate{c.cert}
	}
	return cl
}
