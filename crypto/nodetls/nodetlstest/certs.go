// Package nodetlstest makes throwaway certificate authorities and node
// certificates for tests of TLS between nodes, written as PEM files.
package nodetlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM string // path of the CA certificate
}

// NewCA makes a CA named name and writes its certificate to dir/name-ca.pem.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+"-ca.pem")
	if err := writePEM(path, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, CertPEM: path}, nil
}

// Leaf is how a node certificate is made.
type Leaf struct {
	Name  string             // common name, and file name prefix
	IPs   []net.IP           // default 127.0.0.1
	DNS   []string           // default localhost
	Usage []x509.ExtKeyUsage // default server and client
	Valid time.Duration      // default a day
}

// Issue signs a node certificate and writes dir/<name>.pem and
// dir/<name>-key.pem, returning their paths.
func (ca *CA) Issue(dir string, l Leaf) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	if l.IPs == nil {
		l.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if l.DNS == nil {
		l.DNS = []string{"localhost"}
	}
	if l.Usage == nil {
		l.Usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if l.Valid == 0 {
		l.Valid = 24 * time.Hour
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.Name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(l.Valid),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  l.Usage,
		IPAddresses:  l.IPs,
		DNSNames:     l.DNS,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certPath = filepath.Join(dir, l.Name+".pem")
	keyPath = filepath.Join(dir, l.Name+"-key.pem")
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", kder); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
