package kafka

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestKafkaSCRAMAndOAuthBearer: a node offering SCRAM-SHA-256/512 (static
// users, kept salted and hashed) and OAUTHBEARER (broker JWTs) logs in
// franz-go and librdkafka with the right secrets and refuses wrong ones.
func TestKafkaSCRAMAndOAuthBearer(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "scram-sha-256,scram-sha-512,oauthbearer", "QUEEN_KAFKA_SASL_USERS": "alice:wonderland",
		"JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret}})
	token := e2etest.HS256Token(t, jwt.MapClaims{"sub": "svc", "role": "admin", "exp": time.Now().Add(time.Hour).Unix()})
	for name, opt := range map[string]kgo.Opt{
		"SCRAM-SHA-256": kgo.SASL(scram.Auth{User: "alice", Pass: "wonderland"}.AsSha256Mechanism()),
		"SCRAM-SHA-512": kgo.SASL(scram.Auth{User: "alice", Pass: "wonderland"}.AsSha512Mechanism()),
		"OAUTHBEARER":   kgo.SASL(oauth.Auth{Token: token}.AsMechanism()),
	} {
		if err := roundTrip(t, c, "mech-"+strings.ToLower(name), opt); err != nil {
			t.Fatalf("%s, right secret: %v", name, err)
		}
	}
	for name, opt := range map[string]kgo.Opt{
		"SCRAM-SHA-256 wrong password": kgo.SASL(scram.Auth{User: "alice", Pass: "builder"}.AsSha256Mechanism()),
		"SCRAM-SHA-512 unknown user":   kgo.SASL(scram.Auth{User: "mallory", Pass: "wonderland"}.AsSha512Mechanism()),
		"OAUTHBEARER forged token":     kgo.SASL(oauth.Auth{Token: token[:len(token)-4] + "AAAA"}.AsMechanism()),
	} {
		if err := e2etest.KafkaRefusal(t, c, opt); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}

	// librdkafka (kcat) with SCRAM: a record produced, then read back.
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (.ci/run installs it)")
	}
	ctx := e2etest.Deadline(t, time.Minute)
	auth := []string{"-b", c.Nodes[0].KafkaAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice"}
	kcat(ctx, t, "from kcat\n", append(auth, "-X", "sasl.password=wonderland", "-P", "-t", "mech-kcat")...)
	if out := kcat(ctx, t, "", append(auth, "-X", "sasl.password=wonderland", "-C", "-t", "mech-kcat", "-o", "beginning", "-c", "1", "-e", "-q")...); strings.TrimSpace(out) != "from kcat" {
		t.Fatalf("kcat read back %q", out)
	}
	wrong := exec.CommandContext(ctx, "kcat", append(auth, "-X", "sasl.password=builder", "-L", "-m", "5")...)
	if out, err := wrong.CombinedOutput(); err == nil {
		t.Fatalf("kcat logged in with a wrong SCRAM password:\n%s", out)
	}
}
