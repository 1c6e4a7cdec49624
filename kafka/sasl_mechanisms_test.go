package kafka

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// scramUsers knows alice/secret for both SCRAM mechanisms, stored salted
// and hashed as a real table would be.
func scramUsers(t *testing.T) ScramCredentials {
	t.Helper()
	stored := map[string]ScramCredential{}
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		cred, err := NewScramCredential(mech, "secret", []byte("NaCl-"+mech), 4096)
		if err != nil {
			t.Fatal(err)
		}
		stored[mech] = cred
	}
	return func(_ context.Context, mech, user string) (ScramCredential, Principal, error) {
		if user != "alice" {
			return ScramCredential{}, Principal{}, errors.New("no such user")
		}
		return stored[mech], Principal{Identity: "tenant-a"}, nil
	}
}

// bearerTokens accepts the token "good-token" as alice.
func bearerTokens(_ context.Context, token string) (Principal, error) {
	if token == "good-token" {
		return Principal{User: "alice", Identity: "tenant-a"}, nil
	}
	return Principal{}, errors.New("token does not verify")
}

// TestSASLMechanismsWithKgo: SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER
// log franz-go in with the right secret and refuse the wrong one, on a
// server that offers them all beside PLAIN.
func TestSASLMechanismsWithKgo(t *testing.T) {
	rec := &principalRecorder{seen: make(chan Principal, 16)}
	s := startServer(t, Config{Authenticate: tenantAuthenticator, Scram: scramUsers(t), Bearer: bearerTokens}, func(s *Server) {
		must(t, s.RegisterHandler(3, rec.handle))
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, c := range []struct {
		name      string
		good, bad sasl.Mechanism
	}{
		{"SCRAM-SHA-256", kscram.Auth{User: "alice", Pass: "secret"}.AsSha256Mechanism(), kscram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism()},
		{"SCRAM-SHA-512", kscram.Auth{User: "alice", Pass: "secret"}.AsSha512Mechanism(), kscram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism()},
		{"SCRAM unknown user", kscram.Auth{User: "alice", Pass: "secret"}.AsSha256Mechanism(), kscram.Auth{User: "mallory", Pass: "secret"}.AsSha256Mechanism()},
		{"OAUTHBEARER", oauth.Auth{Token: "good-token"}.AsMechanism(), oauth.Auth{Token: "forged"}.AsMechanism()},
		{"OAUTHBEARER with its subject as authzid", oauth.Auth{Zid: "alice", Token: "good-token"}.AsMechanism(), oauth.Auth{Zid: "bob", Token: "good-token"}.AsMechanism()},
		{"PLAIN beside them", plain.Auth{User: "alice", Pass: "secret"}.AsMechanism(), plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()},
	} {
		good := newKgoClient(t, s, kgo.SASL(c.good))
		if _, err := good.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("%s, right secret: %v", c.name, err)
		}
		if p := within(t, rec.seen); p.User != "alice" || p.Identity != "tenant-a" {
			t.Fatalf("%s: principal %+v", c.name, p)
		}
		bad := newKgoClient(t, s, kgo.SASL(c.bad))
		_, err := bad.Request(ctx, kmsg.NewPtrMetadataRequest())
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s, wrong secret: got %v, want SASL_AUTHENTICATION_FAILED", c.name, err)
		}
		// A refused token is answered with RFC 7628's error challenge,
		// which Kafka clients report.
		if c.name == "OAUTHBEARER" && !strings.Contains(err.Error(), "invalid_token") {
			t.Fatalf("%s, refused token: %v does not say invalid_token", c.name, err)
		}
		if len(rec.seen) != 0 {
			t.Fatalf("%s: a request ran without authentication", c.name)
		}
	}
}

// TestSASLHandshakeOffersWhatIsConfigured: a server offers only the
// mechanisms it has credentials for, refuses the others, and takes only
// PLAIN in the v0 flow.
func TestSASLHandshakeOffersWhatIsConfigured(t *testing.T) {
	s := startServer(t, Config{Scram: scramUsers(t)}, nil)
	c := dialRaw(t, s)
	resp := saslHandshake(c, 1, MechanismPlain)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 2 ||
		resp.SupportedMechanisms[0] != MechanismScramSHA256 || resp.SupportedMechanisms[1] != MechanismScramSHA512 {
		t.Fatalf("PLAIN on a SCRAM-only server: %+v", resp)
	}
	c.expectClosed()
	c = dialRaw(t, s)
	if resp := saslHandshake(c, 0, MechanismScramSHA256); resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("SCRAM in the v0 flow: %+v", resp)
	}
	c.expectClosed()
}

func TestParseBearer(t *testing.T) {
	for msg, want := range map[string]string{
		"n,,\x01auth=Bearer tok\x01\x01":                    "tok",
		"n,,\x01auth=Bearer  tok\x01\x01":                   "tok", // 1*SP (RFC 6750), as Kafka takes it
		"n,a=alice,\x01auth=bearer tok\x01\x01":             "tok",
		"n,,\x01ext=1\x01auth=Bearer tok\x01host=x\x01\x01": "tok",
		"n,,\x01auth=Basic tok\x01\x01":                     "",
		"n,,\x01auth=Bearer tok\x01":                        "",
		"p=x,,\x01auth=Bearer tok\x01\x01":                  "",
		"n,,\x01\x01":                                       "",
		"":                                                  "",
	} {
		tok, _, err := parseBearer([]byte(msg))
		if tok != want || (want == "") != (err != nil) {
			t.Errorf("%q: token %q, err %v; want %q", msg, tok, err, want)
		}
	}
}

// TestScramAcceptsLibrdkafkasNonce: librdkafka sends back its own nonce
// followed by the whole nonce of the server (which already starts with
// its own); Kafka accepts a final nonce that ends with the server's, so a
// broker must too, or kcat and every librdkafka client cannot log in.
func TestScramAcceptsLibrdkafkasNonce(t *testing.T) {
	s := startServer(t, Config{Scram: scramUsers(t)}, nil)
	for name, doubled := range map[string]bool{"RFC 5802": false, "librdkafka": true} {
		c := dialRaw(t, s)
		if resp := saslHandshake(c, 1, MechanismScramSHA256); resp.ErrorCode != 0 {
			t.Fatalf("%s: handshake %d", name, resp.ErrorCode)
		}
		const cnonce = "fyko+d2lbbFgONRv9qkxdawL"
		first := saslAuthenticate(c, "n,,n=alice,r="+cnonce)
		if first.ErrorCode != 0 {
			t.Fatalf("%s: first message: %d", name, first.ErrorCode)
		}
		serverFirst := string(first.SASLAuthBytes)
		attrs := map[string]string{}
		for _, kv := range strings.Split(serverFirst, ",") {
			attrs[kv[:1]] = kv[2:]
		}
		salt, _ := base64.StdEncoding.DecodeString(attrs["s"])
		iters, _ := strconv.Atoi(attrs["i"])
		nonce := attrs["r"]
		if doubled {
			nonce = cnonce + nonce
		}
		withoutProof := "c=biws,r=" + nonce
		salted, err := pbkdf2.Key(sha256.New, "secret", salt, iters, sha256.Size)
		if err != nil {
			t.Fatal(err)
		}
		clientKey := scramHMAC(sha256.New, salted, "Client Key")
		storedKey := sha256.Sum256(clientKey)
		sig := scramHMAC(sha256.New, storedKey[:], "n=alice,r="+cnonce+","+serverFirst+","+withoutProof)
		for i := range clientKey {
			clientKey[i] ^= sig[i]
		}
		final := saslAuthenticate(c, withoutProof+",p="+base64.StdEncoding.EncodeToString(clientKey))
		if final.ErrorCode != 0 || !strings.HasPrefix(string(final.SASLAuthBytes), "v=") {
			t.Fatalf("%s: final message: error %d, %q", name, final.ErrorCode, final.SASLAuthBytes)
		}
	}
}

// The GS2 header SCRAM and OAUTHBEARER share: no channel binding, an
// optional authorization id as sent.
func TestCutGS2Header(t *testing.T) {
	for msg, want := range map[string][2]string{
		"n,,n=u,r=x":     {"", "n=u,r=x"},
		"y,a=bob,n=bob":  {"bob", "n=bob"},
		"n,a=b=2Cc,":     {"b=2Cc", ""},
		"p=tls,,n=u,r=x": {"!"},
		"n,bob,n=u":      {"!"},
		"n,":             {"!"},
		"":               {"!"},
	} {
		authzid, rest, err := cutGS2Header(msg)
		if got := [2]string{authzid, rest}; (err != nil) != (want[0] == "!") || (err == nil && got != want) {
			t.Errorf("%q: %q %q %v; want %q", msg, authzid, rest, err, want)
		}
	}
}
