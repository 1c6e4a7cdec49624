package broker

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// scramLogin says whether user logs in to addr with password over
// SCRAM-SHA-256 (sha512 false) or SCRAM-SHA-512.
func scramLogin(t *testing.T, addr, user, password string, sha512 bool) error {
	t.Helper()
	auth := scram.Auth{User: user, Pass: password}
	mech := auth.AsSha256Mechanism()
	if sha512 {
		mech = auth.AsSha512Mechanism()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctxFor(t), testWait/2)
	defer cancel()
	_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	return err
}

// startScramNode is a node with SCRAM on and one static user, admin.
func startScramNode(t *testing.T) (*testNode, *kgo.Client, *kadm.Client) {
	t.Helper()
	lookup, err := ScramUsers(map[string]string{"admin": "boot"}, false)
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, func(c *Config) { c.Listener.Scram = lookup })
	cl := n.client(kgo.SASL(scram.Auth{User: "admin", Pass: "boot"}.AsSha256Mechanism()))
	return n, cl, kadm.NewClient(cl)
}

// TestScramCredentialsManaged adds a user through AlterUserScramCredentials,
// logs in with it, describes it, checks Kafka's refusals, and deletes it:
// the login is refused after, and the stored value holds no password.
func TestScramCredentialsManaged(t *testing.T) {
	n, cl, adm := startScramNode(t)
	ctx := ctxFor(t)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "wonder"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("upsert: %v %+v", err, res)
	}
	if err := scramLogin(t, n.addr, "alice", "wonder", false); err != nil {
		t.Fatalf("login with the new credential: %v", err)
	}
	if err := scramLogin(t, n.addr, "alice", "wrong", false); err == nil {
		t.Fatal("a wrong password logged in")
	}
	if err := scramLogin(t, n.addr, "alice", "wonder", true); err == nil {
		t.Fatal("SCRAM-SHA-512 logged in without a credential for it")
	}
	it, found, err := n.engine.KVStore(wire.DefaultTenant).KVGet(wire.DefaultTenant, scramNS, []byte("alice"))
	if err != nil || !found || len(it.Value) == 0 {
		t.Fatalf("stored credential: %v %v", found, err)
	}

	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := desc["alice"]; !ok || len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha256 || d.CredInfos[0].Iterations != 4096 {
		t.Fatalf("described: %+v", desc)
	}
	if _, listed := desc["admin"]; listed {
		t.Fatal("a static user is listed")
	}
	one, err := adm.DescribeUserSCRAMs(ctx, "nobody")
	if err == nil {
		err = one["nobody"].Err
	}
	if !errors.Is(err, kerr.ResourceNotFound) {
		t.Fatalf("describing an unknown user: %v", err)
	}

	bad, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || !errors.Is(bad["bob"].Err, kerr.ResourceNotFound) {
		t.Fatalf("deleting what is not there: %v %+v", err, bad)
	}
	// What kadm refuses before sending, sent as is.
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	raw.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "carol", Mechanism: 1, Iterations: 100, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "dave", Mechanism: 3, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "erin", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "erin", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("q")},
	}
	rr, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"carol": kerr.UnacceptableCredential.Code, "dave": kerr.UnsupportedSaslMechanism.Code, "erin": kerr.DuplicateResource.Code}
	for _, r := range rr.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("%s: %d, want %d", r.User, r.ErrorCode, want[r.User])
		}
	}
	if len(rr.Results) != 3 {
		t.Fatalf("results: %+v", rr.Results)
	}

	del, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || del.Error() != nil {
		t.Fatalf("delete: %v %+v", err, del)
	}
	if err := scramLogin(t, n.addr, "alice", "wonder", false); err == nil {
		t.Fatal("a deleted credential logged in")
	}
	if err := scramLogin(t, n.addr, "admin", "boot", false); err != nil {
		t.Fatalf("the static user: %v", err)
	}
}

// TestScramKeysMatchTheLoginSide: the keys derived from a client's salted
// password are those the login side derives from the password.
func TestScramKeysMatchTheLoginSide(t *testing.T) {
	salt := []byte("0123456789abcdef")
	for _, mech := range []string{kafka.MechanismScramSHA256, kafka.MechanismScramSHA512} {
		h := sha256.New
		if mech == kafka.MechanismScramSHA512 {
			h = sha512.New
		}
		salted, err := pbkdf2.Key(h, "pw", salt, 4096, h().Size())
		if err != nil {
			t.Fatal(err)
		}
		want, err := kafka.NewScramCredential(mech, "pw", salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		stored, server := scramKeys(mech, salted)
		if !bytes.Equal(stored, want.StoredKey) || !bytes.Equal(server, want.ServerKey) {
			t.Fatalf("%s: keys differ from the login side's", mech)
		}
	}
}

// TestScramUserTenant: without tenancy any user is managed; in tenancy
// mode only the user named by the login's own tenant.
func TestScramUserTenant(t *testing.T) {
	const mine = "7b0d6a4e-2f55-4c1e-9a51-0f2f3b7c9d11"
	id, err := tenancy.Parse(mine)
	if err != nil {
		t.Fatal(err)
	}
	if err := scramUserTenant(wire.DefaultTenant, "anyone"); err != nil {
		t.Fatalf("default tenant: %v", err)
	}
	if err := scramUserTenant(id, mine); err != nil {
		t.Fatalf("own tenant: %v", err)
	}
	for _, other := range []string{"anyone", "1b0d6a4e-2f55-4c1e-9a51-0f2f3b7c9d11"} {
		if err := scramUserTenant(id, other); !errors.Is(err, errScramOtherTenant) || scramCode(err) != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("%s: %v", other, err)
		}
	}
	if err := scramUserTenant(wire.DefaultTenant, ""); scramCode(err) != kerr.UnacceptableCredential.Code {
		t.Fatalf("empty user: %v", err)
	}
}
