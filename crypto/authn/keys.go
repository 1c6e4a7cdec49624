package authn

import (
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// minRSABits is the smallest RSA modulus accepted, from PEM or JWKS.
const minRSABits = 2048

// staticKeys are the public keys given as PEM text (JWT_PUBLIC_KEY).
type staticKeys struct {
	rsa *rsa.PublicKey
	ed  ed25519.PublicKey
}

// parsePublicKeyPEM reads JWT_PUBLIC_KEY: one or more PEM blocks, each a
// "PUBLIC KEY" (PKIX), "RSA PUBLIC KEY" (PKCS#1) or "CERTIFICATE", holding at
// most one RSA and one Ed25519 key. Environment variables often carry PEM with
// literal "\n" sequences instead of newlines; those are accepted.
func parsePublicKeyPEM(text string) (staticKeys, error) {
	var ks staticKeys
	if !strings.Contains(text, "\n") && strings.Contains(text, `\n`) {
		text = strings.ReplaceAll(text, `\n`, "\n")
	}
	rest := []byte(text)
	found := 0
	for {
		block, r := pem.Decode(rest)
		if block == nil {
			break
		}
		rest = r
		found++
		key, err := parsePEMBlock(block)
		if err != nil {
			return ks, err
		}
		switch k := key.(type) {
		case *rsa.PublicKey:
			if ks.rsa != nil {
				return ks, errors.New("JWT_PUBLIC_KEY holds more than one RSA key")
			}
			if err := checkRSA(k); err != nil {
				return ks, fmt.Errorf("JWT_PUBLIC_KEY: %w", err)
			}
			ks.rsa = k
		case ed25519.PublicKey:
			if ks.ed != nil {
				return ks, errors.New("JWT_PUBLIC_KEY holds more than one Ed25519 key")
			}
			ks.ed = k
		default:
			return ks, fmt.Errorf("JWT_PUBLIC_KEY: unsupported key type %T (want RSA or Ed25519)", key)
		}
	}
	if found == 0 {
		return ks, errors.New("JWT_PUBLIC_KEY holds no PEM block")
	}
	return ks, nil
}

func parsePEMBlock(b *pem.Block) (any, error) {
	switch b.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("JWT_PUBLIC_KEY: %w", err)
		}
		return k, nil
	case "RSA PUBLIC KEY":
		k, err := x509.ParsePKCS1PublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("JWT_PUBLIC_KEY: %w", err)
		}
		return k, nil
	case "CERTIFICATE":
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("JWT_PUBLIC_KEY: %w", err)
		}
		return c.PublicKey, nil
	}
	if strings.Contains(b.Type, "PRIVATE") {
		return nil, errors.New("JWT_PUBLIC_KEY holds a private key; give the public key only")
	}
	return nil, fmt.Errorf("JWT_PUBLIC_KEY: unsupported PEM block %q", b.Type)
}

func checkRSA(k *rsa.PublicKey) error {
	if k.N == nil || k.N.BitLen() < minRSABits {
		return fmt.Errorf("RSA key shorter than %d bits", minRSABits)
	}
	if k.E < 3 || k.E%2 == 0 {
		return errors.New("RSA key has an invalid public exponent")
	}
	return nil
}

// jwk is one usable key from a JWKS document.
type jwk struct {
	kid string
	alg string // the JWK's "alg" when given: the only algorithm it may verify
	key any    // *rsa.PublicKey or ed25519.PublicKey
}

// rawJWK holds the members of a JWK (RFC 7517/7518/8037) that matter here.
type rawJWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
}

// parseJWKS parses a JWKS document. Keys that cannot verify broker tokens
// (other key types or curves, encryption keys, short RSA moduli, malformed
// members) are skipped and reported in skipped; only a malformed document is
// an error.
func parseJWKS(body []byte) (keys []jwk, skipped []string, err error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, nil, fmt.Errorf("JWKS document: %w", err)
	}
	if doc.Keys == nil {
		return nil, nil, errors.New(`JWKS document has no "keys" array`)
	}
	for i, raw := range doc.Keys {
		var r rawJWK
		if err := json.Unmarshal(raw, &r); err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d: %v", i, err))
			continue
		}
		k, err := r.parse()
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %v", i, r.Kid, err))
			continue
		}
		keys = append(keys, k)
	}
	return keys, skipped, nil
}

func (r rawJWK) parse() (jwk, error) {
	if r.Use != "" && r.Use != "sig" {
		return jwk{}, fmt.Errorf("use %q is not sig", r.Use)
	}
	out := jwk{kid: r.Kid, alg: r.Alg}
	switch r.Kty {
	case "RSA":
		if r.Alg != "" && r.Alg != AlgRS256 && r.Alg != AlgRS384 && r.Alg != AlgRS512 {
			return jwk{}, fmt.Errorf("RSA key for alg %q", r.Alg)
		}
		n, err := b64url(r.N)
		if err != nil {
			return jwk{}, fmt.Errorf("n: %w", err)
		}
		e, err := b64url(r.E)
		if err != nil {
			return jwk{}, fmt.Errorf("e: %w", err)
		}
		if len(e) == 0 || len(e) > 4 {
			return jwk{}, errors.New("e out of range")
		}
		var ev int
		for _, b := range e {
			ev = ev<<8 | int(b)
		}
		k := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: ev}
		if err := checkRSA(k); err != nil {
			return jwk{}, err
		}
		out.key = k
	case "OKP":
		if r.Crv != "Ed25519" {
			return jwk{}, fmt.Errorf("OKP curve %q is not Ed25519", r.Crv)
		}
		if r.Alg != "" && r.Alg != AlgEdDSA && r.Alg != "Ed25519" {
			return jwk{}, fmt.Errorf("Ed25519 key for alg %q", r.Alg)
		}
		x, err := b64url(r.X)
		if err != nil {
			return jwk{}, fmt.Errorf("x: %w", err)
		}
		if len(x) != ed25519.PublicKeySize {
			return jwk{}, fmt.Errorf("x is %d bytes, want %d", len(x), ed25519.PublicKeySize)
		}
		out.key = ed25519.PublicKey(x)
		out.alg = "" // "EdDSA" and "Ed25519" both mean the only algorithm we have
	default:
		return jwk{}, fmt.Errorf("kty %q not supported", r.Kty)
	}
	return out, nil
}

// b64url decodes base64url without padding (RFC 7515 §2), tolerating
// padding some publishers add anyway.
func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// describeKeys names the static keys for the boot line.
func (ks staticKeys) describe() string {
	var parts []string
	if ks.rsa != nil {
		parts = append(parts, fmt.Sprintf("RSA-%d", ks.rsa.N.BitLen()))
	}
	if ks.ed != nil {
		parts = append(parts, "Ed25519")
	}
	if parts == nil {
		return "<unset>"
	}
	return strings.Join(parts, "+")
}
