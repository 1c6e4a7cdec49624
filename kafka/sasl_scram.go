package kafka

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// ScramCredential is what a server keeps of a SCRAM password (RFC 5802
// §3): the salt and iteration count a client derives its key with, and
// the stored and server keys. Never the password.
type ScramCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// scramHash is the hash of a SCRAM mechanism.
func scramHash(mechanism string) (func() hash.Hash, error) {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New, nil
	case MechanismScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("kafka: %q is not a SCRAM mechanism", mechanism)
}

// NewScramCredential derives the credential of password for mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512) with salt and iterations. The password
// is used as its UTF-8 bytes, as Kafka and its clients do.
func NewScramCredential(mechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	h, err := scramHash(mechanism)
	if err != nil {
		return ScramCredential{}, err
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return ScramCredential{}, fmt.Errorf("kafka: SCRAM credential: %w", err)
	}
	clientKey := scramHMAC(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{Salt: salt, Iterations: iterations, StoredKey: stored.Sum(nil),
		ServerKey: scramHMAC(h, salted, "Server Key")}, nil
}

func scramHMAC(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// scramLogin is a SCRAM exchange under way on a connection, between the
// client's first message and its final one.
type scramLogin struct {
	mechanism   string
	gs2Header   string // echoed, base64, as the final message's c=
	clientFirst string // client-first-message-bare
	serverFirst string
	nonce       string // client nonce + server nonce
	cred        ScramCredential
	principal   Principal
}

// errScramRefused is what a client whose SCRAM login fails is told: not
// whether the user or the proof was wrong.
var errScramRefused = errors.New("invalid username or password")

// stepScram takes the client's next SCRAM message (RFC 5802 §5): the first
// starts the exchange and is answered with the nonce, salt and iteration
// count; the final one carries the client's proof, answered with the
// server's signature once the connection is logged in. A re-handshake
// restarts the exchange.
func (c *Conn) stepScram(ctx context.Context, mechanism string, msg []byte) ([]byte, error) {
	c.mu.Lock()
	login := c.scram
	c.scram = nil // one message per step; a first message sets it again
	c.mu.Unlock()
	if login == nil {
		login, out, err := c.scramFirst(ctx, mechanism, string(msg))
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.scram = login
		c.mu.Unlock()
		return []byte(out), nil
	}
	out, err := login.final(string(msg))
	if err != nil {
		c.refused(mechanism, login.principal.User, err)
		return nil, errScramRefused
	}
	if err := c.login(mechanism, login.principal, saslAuthenticated); err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// scramFirst parses client-first-message ("n,[a=authzid],n=user,r=nonce"),
// looks the user up and builds server-first-message.
func (c *Conn) scramFirst(ctx context.Context, mechanism, msg string) (*scramLogin, string, error) {
	bad := func(why string) (*scramLogin, string, error) {
		return nil, "", errors.New("invalid SCRAM client-first-message: " + why)
	}
	authzid, bare, err := cutGS2Header(msg)
	if err != nil {
		return bad(err.Error())
	}
	authzid = scramUnescape(authzid)
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) < 3 {
		return bad("expected n=user,r=nonce")
	}
	user := scramUnescape(attrs[0][2:])
	if user == "" || (authzid != "" && authzid != user) {
		return bad("the authorization id must be empty or the user name")
	}
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "m=") {
			return bad("mandatory extensions are not supported")
		}
	}
	cred, principal, err := c.srv.cfg.Scram(ctx, mechanism, user)
	if err != nil {
		c.refused(mechanism, user, err)
		return nil, "", errScramRefused
	}
	if principal.User == "" {
		principal.User = user
	}
	var serverNonce [24]byte
	if _, err := rand.Read(serverNonce[:]); err != nil {
		return nil, "", err
	}
	nonce := attrs[1][2:] + base64.RawURLEncoding.EncodeToString(serverNonce[:])
	serverFirst := "r=" + nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return &scramLogin{mechanism: mechanism, gs2Header: msg[:len(msg)-len(bare)], clientFirst: bare,
		serverFirst: serverFirst, nonce: nonce, cred: cred, principal: principal}, serverFirst, nil
}

// final checks client-final-message ("c=binding,r=nonce[,ext],p=proof")
// and returns server-final-message.
func (l *scramLogin) final(msg string) (string, error) {
	withoutProof, proofB64, ok := strings.Cut(msg, ",p=")
	if !ok || strings.Contains(proofB64, ",") {
		return "", errors.New("client-final-message without a proof")
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(l.gs2Header)) {
		return "", errors.New("client-final-message: the channel binding does not echo the header")
	}
	// librdkafka puts its own nonce before the whole nonce the server
	// sent; Kafka accepts a nonce that ends with the server's, and so do we.
	if !strings.HasPrefix(attrs[1], "r=") || !strings.HasSuffix(attrs[1], l.nonce) {
		return "", errors.New("client-final-message: the nonce is not the server's")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return "", errors.New("client-final-message: the proof is not base64")
	}
	h, err := scramHash(l.mechanism)
	if err != nil {
		return "", err
	}
	authMessage := l.clientFirst + "," + l.serverFirst + "," + withoutProof
	signature := scramHMAC(h, l.cred.StoredKey, authMessage)
	if len(proof) != len(signature) {
		return "", errors.New("wrong proof")
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ signature[i]
	}
	stored := h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), l.cred.StoredKey) != 1 {
		return "", errors.New("wrong proof")
	}
	return "v=" + base64.StdEncoding.EncodeToString(scramHMAC(h, l.cred.ServerKey, authMessage)), nil
}

// scramUnescape decodes a saslname: "=2C" is ',' and "=3D" is '='.
func scramUnescape(s string) string {
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
}
