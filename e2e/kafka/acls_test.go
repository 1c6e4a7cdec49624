package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Kafka ACLs (issue 36, docs/acls.md) driven by franz-go's kadm on three
// real nodes with QUEEN_ACLS=true and SASL/PLAIN users: bindings created
// through one node, described with kadm's filters through another,
// enforced on a third; a user allowed WRITE on orders.* (prefixed) writes
// orders.x and is refused payments, a DENY beats her ALLOW, the super
// user does everything, and deleted bindings stop granting.

// aclAnyone makes a kadm describe or delete builder match every principal
// and host (kadm builds no filter for a builder naming neither).
func aclAnyone(b *kadm.ACLBuilder) *kadm.ACLBuilder {
	return b.Allow().AllowHosts().Deny().DenyHosts()
}

func TestKafkaACLs(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{
		"QUEEN_KAFKA_SASL": "plain", "QUEEN_KAFKA_SASL_USERS": "admin:adminpw,alice:alicepw,bob:bobpw",
		"QUEEN_ACLS": "true", "QUEEN_ACL_SUPER_USERS": "User:admin",
	}})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	login := func(i int, user string) *kgo.Client {
		return e2etest.KafkaClient(t, c.Nodes[i], kgo.SASL(plain.Auth{User: user, Pass: user + "pw"}.AsMechanism()),
			kgo.RecordRetries(2), kgo.UnknownTopicRetries(2), kgo.RetryTimeout(20*time.Second))
	}
	admin := login(0, "admin")
	adm := adminOf(admin)
	createTopics(ctx, t, adm, 1, "orders.x", "orders.secret", "payments")

	create := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
				}
			}
		}
		if err != nil {
			t.Fatalf("create ACLs: %v", err)
		}
	}
	create(kadm.NewACLs().Topics("orders.").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").Operations(kadm.OpWrite))
	create(kadm.NewACLs().Topics("orders.secret").Deny("User:alice").Operations(kadm.OpWrite))
	create(kadm.NewACLs().Groups("audit").Allow("User:bob").AllowHosts("10.9.9.9").Operations(kadm.OpRead))

	// Described through another node at once (read-your-writes), with
	// kadm's filters.
	adm2 := adminOf(login(2, "admin"))
	describe := func(b *kadm.ACLBuilder) []string {
		t.Helper()
		res, err := adm2.DescribeACLs(ctx, b)
		if err != nil {
			t.Fatalf("describe: %v", err)
		}
		var out []string
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("describe: %v", r.Err)
			}
			for _, d := range r.Described {
				out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s:%s:%s", d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
			}
		}
		slices.Sort(out)
		return out
	}
	all := aclAnyone(kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations())
	if got, want := describe(all), []string{
		"GROUP:LITERAL:audit:User:bob:10.9.9.9:READ:ALLOW",
		"TOPIC:LITERAL:orders.secret:User:alice:*:WRITE:DENY",
		"TOPIC:PREFIXED:orders.:User:alice:*:WRITE:ALLOW",
	}; !slices.Equal(got, want) {
		t.Fatalf("describe all:\n got %q\nwant %q", got, want)
	}
	if got := describe(aclAnyone(kadm.NewACLs().Topics("orders.x").ResourcePatternType(kadm.ACLPatternMatch).Operations())); len(got) != 1 {
		t.Fatalf("MATCH orders.x: %q", got)
	}
	if got := describe(aclAnyone(kadm.NewACLs().Topics().ResourcePatternType(kadm.ACLPatternPrefixed).Operations())); len(got) != 1 {
		t.Fatalf("PREFIXED topics: %q", got)
	}
	if got := describe(kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Deny("User:alice").DenyHosts().Operations(kadm.OpWrite)); len(got) != 1 {
		t.Fatalf("alice's WRITE denials: %q", got)
	}

	// Enforced on the third node, which learns the bindings within its
	// refresh (a second): poll until alice writes orders.x.
	alice := login(1, "alice")
	produce := func(cl *kgo.Client, topic string) error {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	var last error
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := harness.Poll(pctx, 200*time.Millisecond, func() (bool, error) {
		last = produce(alice, "orders.x")
		return last == nil, nil
	}); err != nil {
		t.Fatalf("alice to orders.x: %v (last: %v)", err, last)
	}
	if err := produce(alice, "payments"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to payments: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// The DENY was created after the ALLOW: the third node may have
	// refreshed between the two, and learns it within its next refresh.
	pctx3, cancel3 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel3()
	if err := harness.Poll(pctx3, 200*time.Millisecond, func() (bool, error) {
		last = produce(alice, "orders.secret")
		return errors.Is(last, kerr.TopicAuthorizationFailed), nil
	}); err != nil {
		t.Fatalf("alice to orders.secret (DENY beats the prefixed ALLOW): %v (last: %v)", err, last)
	}
	// Not even DESCRIBE on the cluster: alice may not list ACLs.
	if res, err := adminOf(alice).DescribeACLs(ctx, all); err != nil || len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice describes ACLs: %v %+v", err, res)
	}
	// Bob has no topic binding at all.
	if err := produce(login(1, "bob"), "orders.x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob to orders.x: %v", err)
	}

	// The super user does everything, on any node.
	for _, topic := range []string{"payments", "orders.secret"} {
		if err := produce(login(1, "admin"), topic); err != nil {
			t.Fatalf("admin to %s: %v", topic, err)
		}
	}
	if _, err := adminOf(login(1, "admin")).DeleteTopics(ctx, "payments"); err != nil {
		t.Fatalf("admin deletes payments: %v", err)
	}

	// Deleting the prefixed ALLOW through the second node: alice is
	// refused orders.x too once the third node has refreshed.
	del, err := adminOf(login(1, "admin")).DeleteACLs(ctx, aclAnyone(kadm.NewACLs().Topics("orders.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations()))
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 1 {
		t.Fatalf("delete the prefixed ALLOW: %v %+v", err, del)
	}
	pctx2, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	if err := harness.Poll(pctx2, 200*time.Millisecond, func() (bool, error) {
		last = produce(alice, "orders.x")
		return errors.Is(last, kerr.TopicAuthorizationFailed), nil
	}); err != nil {
		t.Fatalf("alice still writes orders.x after the delete: %v (last: %v)", err, last)
	}
	if got := describe(all); len(got) != 2 {
		t.Fatalf("after the delete: %q", got)
	}
}
