package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// tenantB is the tenant of aclNode logins whose password is "b".
var tenantB = wire.ID{0: 0xb}

// startACLNode is a node with ACLs on and super user User:admin, whose
// PLAIN logins take any user name; the password "b" logs in to tenantB,
// any other to the default tenant.
func startACLNode(t *testing.T) *testNode {
	t.Helper()
	h, e := raftgroupstest.Start(t)
	az := acl.New(acl.Config{Enabled: true, SuperUsers: []string{"User:admin"}, Store: e.ACLStore(), Logger: quiet})
	az.Start()
	t.Cleanup(az.Close)
	return serveBroker(t, h, e, func(c *Config) {
		c.ACL = az
		c.Listener.Authenticate = func(_ context.Context, user, password string) (kafka.Principal, error) {
			id := Identity{Tenant: wire.DefaultTenant}
			if password == "b" {
				id.Tenant = tenantB
			}
			return kafka.Principal{User: user, Identity: id}, nil
		}
	})
}

// loginAs is a client of n logged in as user with password.
func loginAs(n *testNode, user, password string, opts ...kgo.Opt) *kgo.Client {
	return n.client(append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()),
		kgo.RecordRetries(1), kgo.UnknownTopicRetries(1)}, opts...)...)
}

// aclStrings is a describe answer as sorted strings.
func aclStrings(rs kadm.DescribeACLsResults) []string {
	var out []string
	for _, r := range rs {
		if r.Err != nil {
			out = append(out, "err:"+r.Err.Error())
		}
		for _, d := range r.Described {
			out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s:%s:%s", d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
		}
	}
	slices.Sort(out)
	return out
}

// anyone makes a kadm describe or delete builder match every principal
// and host: kadm builds no filter at all for a builder naming neither.
func anyone(b *kadm.ACLBuilder) *kadm.ACLBuilder { return b.Allow().AllowHosts().Deny().DenyHosts() }

func mustCreateACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctxFor(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %+v: %v %s", r, r.Err, r.ErrMessage)
		}
	}
}

// TestACLsOffAnswerSecurityDisabled: without QUEEN_ACLS the ACL APIs
// answer SECURITY_DISABLED, as Kafka without an authorizer.
func TestACLsOffAnswerSecurityDisabled(t *testing.T) {
	n := startNode(t, nil)
	adm := kadm.NewClient(n.client())
	ctx := ctxFor(t)
	res, err := adm.DescribeACLs(ctx, anyone(kadm.NewACLs().AnyResource().Operations().ResourcePatternType(kadm.ACLPatternAny)))
	if err != nil || len(res) == 0 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("describe: %v %+v", err, res)
	}
	cr, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:a").Operations(kadm.OpRead))
	if err != nil || len(cr) != 1 || !errors.Is(cr[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("create: %v %+v", err, cr)
	}
}

// TestACLAPIsRoundTrip: a super user creates bindings, describes them with
// kadm's filters (any, literal, prefixed, match, by principal and
// operation), deletes some by filter; a user without ALTER on the cluster
// is refused.
func TestACLAPIsRoundTrip(t *testing.T) {
	n := startACLNode(t)
	adm := kadm.NewClient(loginAs(n, "admin", "x"))
	ctx := ctxFor(t)
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("orders.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpWrite, kadm.OpDescribe))
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("orders.secret").Deny("User:alice").Operations(kadm.OpWrite))
	mustCreateACLs(t, adm, kadm.NewACLs().Groups("*").Allow("User:bob").AllowHosts("10.0.0.1").Operations(kadm.OpRead))

	all := anyone(kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations())
	got, err := adm.DescribeACLs(ctx, all)
	want := []string{
		"GROUP:LITERAL:*:User:bob:10.0.0.1:READ:ALLOW",
		"TOPIC:LITERAL:orders.secret:User:alice:*:WRITE:DENY",
		"TOPIC:PREFIXED:orders.:User:alice:*:DESCRIBE:ALLOW",
		"TOPIC:PREFIXED:orders.:User:alice:*:WRITE:ALLOW",
	}
	if s := aclStrings(got); err != nil || !slices.Equal(s, want) {
		t.Fatalf("describe all: %v\n got %q\nwant %q", err, s, want)
	}
	for name, c := range map[string]struct {
		b    *kadm.ACLBuilder
		want int
	}{
		"literal topics":   {anyone(kadm.NewACLs().Topics().Operations()), 1},
		"prefixed topics":  {anyone(kadm.NewACLs().Topics().ResourcePatternType(kadm.ACLPatternPrefixed).Operations()), 2},
		"match orders.x":   {anyone(kadm.NewACLs().Topics("orders.x").ResourcePatternType(kadm.ACLPatternMatch).Operations()), 2},
		"match secret":     {anyone(kadm.NewACLs().Topics("orders.secret").ResourcePatternType(kadm.ACLPatternMatch).Operations()), 3},
		"alice's writes":   {kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow("User:alice").Deny("User:alice").AllowHosts().DenyHosts().Operations(kadm.OpWrite), 2},
		"groups any":       {anyone(kadm.NewACLs().Groups().ResourcePatternType(kadm.ACLPatternAny).Operations()), 1},
		"transactional id": {anyone(kadm.NewACLs().TransactionalIDs().ResourcePatternType(kadm.ACLPatternAny).Operations()), 0},
	} {
		got, err := adm.DescribeACLs(ctx, c.b)
		if s := aclStrings(got); err != nil || len(s) != c.want {
			t.Errorf("%s: %v %q, want %d", name, err, s, c.want)
		}
	}

	// Not a super user, no ALTER on the cluster: refused.
	bob := kadm.NewClient(loginAs(n, "bob", "x"))
	if res, err := bob.CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:bob").Operations(kadm.OpAll)); err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob creates: %v %+v", err, res)
	}
	if res, err := bob.DescribeACLs(ctx, all); err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob describes: %v %+v", err, res)
	}
	// ALTER on the cluster makes bob an ACL admin.
	mustCreateACLs(t, adm, kadm.NewACLs().Clusters().Allow("User:bob").Operations(kadm.OpAlter))
	mustCreateACLs(t, bob, kadm.NewACLs().TransactionalIDs("tx").Allow("User:bob").Operations(kadm.OpWrite))

	// Invalid creations are refused one by one.
	req := kmsg.NewPtrCreateACLsRequest()
	bad := kmsg.NewCreateACLsRequestCreation()
	bad.ResourceType, bad.ResourceName, bad.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeMatch
	bad.Principal, bad.Host, bad.Operation, bad.PermissionType = "User:x", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	good := bad
	good.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	noType := good
	noType.Principal = "x"
	req.Creations = []kmsg.CreateACLsRequestCreation{bad, good, noType}
	cresp, err := req.RequestWith(ctx, loginAs(n, "admin", "x"))
	if err != nil || cresp.Results[0].ErrorCode != kerr.InvalidRequest.Code || cresp.Results[1].ErrorCode != 0 ||
		cresp.Results[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("mixed creations: %v %+v", err, cresp)
	}

	// Delete by filter: the prefixed ones, then alice's deny.
	del, err := adm.DeleteACLs(ctx, anyone(kadm.NewACLs().Topics("orders.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations()))
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 2 {
		t.Fatalf("delete prefixed: %v %+v", err, del)
	}
	del, err = adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders.secret").ResourcePatternType(kadm.ACLPatternMatch).Deny("User:alice").DenyHosts().Operations())
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 1 {
		t.Fatalf("delete match: %v %+v", err, del)
	}
	got, err = adm.DescribeACLs(ctx, anyone(kadm.NewACLs().Topics().ResourcePatternType(kadm.ACLPatternAny).Operations()))
	if s := aclStrings(got); err != nil || !slices.Equal(s, []string{"TOPIC:LITERAL:t:User:x:*:READ:ALLOW"}) {
		t.Fatalf("after deletes: %v %q", err, s)
	}
}

// TestACLProduceAndMetadata: alice may write orders.* (prefixed) but not
// payments, nor orders.secret (a DENY beats her ALLOW); a produce naming
// both gets TOPIC_AUTHORIZATION_FAILED for the refused topic only; her
// metadata lists only what she may describe; the super user does all.
func TestACLProduceAndMetadata(t *testing.T) {
	n := startACLNode(t)
	admCl := loginAs(n, "admin", "x")
	adm := kadm.NewClient(admCl)
	ctx := ctxFor(t)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "orders.x", "orders.secret", "payments"); err != nil {
		t.Fatal(err)
	}
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("orders.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpWrite))
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("orders.secret").Deny("User:alice").Operations(kadm.OpWrite))

	alice := loginAs(n, "alice", "x")
	produce := func(cl *kgo.Client, topic string) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce(alice, "orders.x"); err != nil {
		t.Fatalf("alice to orders.x: %v", err)
	}
	if err := produce(alice, "payments"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to payments: %v", err)
	}
	if err := produce(alice, "orders.secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to orders.secret (denied): %v", err)
	}
	// One request, two topics: each answered on its own.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	for _, topic := range []string{"orders.x", "payments"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = mustBatch(t, []byte("v"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["orders.x"] != 0 || codes["payments"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("mixed produce: %v", codes)
	}

	// Metadata: WRITE implies DESCRIBE on orders.* (not orders.secret,
	// whose DENY names WRITE only, so it is still described).
	md, err := kadm.NewClient(alice).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := md.Topics.Names()
	slices.Sort(names)
	if !slices.Equal(names, []string{"orders.secret", "orders.x"}) {
		t.Fatalf("alice's metadata: %v", names)
	}
	md, err = kadm.NewClient(alice).Metadata(ctx, "payments")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(md.Topics["payments"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's metadata of payments: %v %+v", err, md.Topics["payments"])
	}

	// Alice may not read, nor create, nor delete.
	if _, err := kadm.NewClient(alice).CreateTopics(ctx, 1, 1, nil, "orders.new"); err == nil {
		if res, _ := kadm.NewClient(alice).CreateTopics(ctx, 1, 1, nil, "orders.new2"); res["orders.new2"].Err == nil {
			t.Fatal("alice created a topic")
		}
	}
	if res, err := kadm.NewClient(alice).DeleteTopics(ctx, "orders.x"); err == nil && res["orders.x"].Err == nil {
		t.Fatal("alice deleted a topic")
	}

	// The super user does everything.
	if err := produce(admCl, "payments"); err != nil {
		t.Fatalf("admin to payments: %v", err)
	}
	if err := produce(admCl, "orders.secret"); err != nil {
		t.Fatalf("admin to orders.secret: %v", err)
	}
}

// TestACLTenantIsolation: a tenant's login sees and changes only its own
// tenant's bindings, and another tenant's bindings grant nothing in it.
func TestACLTenantIsolation(t *testing.T) {
	n := startACLNode(t)
	ctx := ctxFor(t)
	admA := kadm.NewClient(loginAs(n, "admin", "x"))
	admB := kadm.NewClient(loginAs(n, "admin", "b"))
	mustCreateACLs(t, admA, kadm.NewACLs().Topics("*").Allow("User:carol").Operations(kadm.OpAll))
	all := anyone(kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations())
	if got, err := admB.DescribeACLs(ctx, all); err != nil || len(aclStrings(got)) != 0 {
		t.Fatalf("tenant B sees %v %q", err, aclStrings(got))
	}
	if del, err := admB.DeleteACLs(ctx, all); err != nil || len(del[0].Deleted) != 0 {
		t.Fatalf("tenant B deleted %v %+v", err, del)
	}
	if got, err := admA.DescribeACLs(ctx, all); err != nil || len(aclStrings(got)) != 1 {
		t.Fatalf("tenant A lost its binding: %v %q", err, aclStrings(got))
	}
	if _, err := admB.CreateTopics(ctx, 1, 1, nil, "bt"); err != nil {
		t.Fatal(err)
	}
	carolB := loginAs(n, "carol", "b")
	if err := carolB.ProduceSync(ctx, &kgo.Record{Topic: "bt", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("carol in tenant B, granted in A only: %v", err)
	}
}

// TestEveryKeyHasAnACLRule: every key the broker serves is checked by a
// rule of its own (the catch-all refuses), so a principal allowed
// everything is refused nothing and one allowed nothing is refused.
func TestEveryKeyHasAnACLRule(t *testing.T) {
	az := acl.New(acl.Config{Enabled: true, Store: acl.NewMemStore()})
	tenant := wire.DefaultTenant.String()
	var all []acl.Binding
	for rt := acl.ResourceTopic; rt <= acl.ResourceTransactionalID; rt++ {
		name := acl.WildcardName
		if rt == acl.ResourceCluster {
			name = acl.ClusterName
		}
		all = append(all, acl.Binding{Resource: rt, Name: name, Pattern: acl.PatternLiteral, Principal: "User:all", Host: "*", Op: acl.OpAll, Perm: acl.PermAllow})
	}
	if err := az.Create(context.Background(), tenant, all); err != nil {
		t.Fatal(err)
	}
	b := &Broker{cfg: Config{ACL: az}}
	for key := range b.handlers() {
		req := kmsg.RequestForKey(key)
		switch req.(type) {
		case *kmsg.ProduceRequest, *kmsg.MetadataRequest, *kmsg.ListGroupsRequest, *kmsg.ListTransactionsRequest,
			*kmsg.DescribeACLsRequest, *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest:
			continue // answered in part by aclGuarded, or checked by the handler
		}
		fillNames(req)
		n := aclNeeds{k: aclCaller{a: az, r: acl.Request{Tenant: tenant, Principal: "User:all", Host: "127.0.0.1"}}}
		b.aclCheck(&n, nil, req)
		if n.code != 0 {
			t.Errorf("%s: refused a principal allowed everything (%d): no rule?", kafka.KeyName(key), n.code)
		}
		n = aclNeeds{k: aclCaller{a: az, r: acl.Request{Tenant: tenant, Principal: "User:none", Host: "127.0.0.1"}}}
		b.aclCheck(&n, nil, req)
		if n.code == 0 {
			t.Errorf("%s: let a principal allowed nothing through", kafka.KeyName(key))
		}
	}
}

// fillNames gives a request one named resource of each kind it lists, so
// its rule has something to check.
func fillNames(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		r.Topics = []kmsg.FetchRequestTopic{{Topic: "t"}}
	case *kmsg.ListOffsetsRequest:
		r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t"}}
	case *kmsg.OffsetForLeaderEpochRequest:
		r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "t"}}
	case *kmsg.DescribeTopicPartitionsRequest:
		r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "t"}}
	case *kmsg.DescribeProducersRequest:
		r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t"}}
	case *kmsg.CreateTopicsRequest:
		r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t"}}
	case *kmsg.DeleteTopicsRequest:
		r.TopicNames = []string{"t"}
	case *kmsg.DeleteRecordsRequest:
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t"}}
	case *kmsg.CreatePartitionsRequest:
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t"}}
	case *kmsg.DescribeConfigsRequest:
		r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	case *kmsg.AlterConfigsRequest:
		r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	case *kmsg.IncrementalAlterConfigsRequest:
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey = "g"
	case *kmsg.OffsetFetchRequest:
		r.Group = "g"
	case *kmsg.OffsetCommitRequest:
		r.Group = "g"
	case *kmsg.JoinGroupRequest:
		r.Group = "g"
	case *kmsg.SyncGroupRequest:
		r.Group = "g"
	case *kmsg.HeartbeatRequest:
		r.Group = "g"
	case *kmsg.LeaveGroupRequest:
		r.Group = "g"
	case *kmsg.DescribeGroupsRequest:
		r.Groups = []string{"g"}
	case *kmsg.DeleteGroupsRequest:
		r.Groups = []string{"g"}
	case *kmsg.OffsetDeleteRequest:
		r.Group = "g"
	case *kmsg.ConsumerGroupHeartbeatRequest:
		r.Group = "g"
	case *kmsg.ConsumerGroupDescribeRequest:
		r.Groups = []string{"g"}
	case *kmsg.ShareGroupHeartbeatRequest:
		r.GroupID = "g"
	case *kmsg.ShareGroupDescribeRequest:
		r.GroupIDs = []string{"g"}
	case *kmsg.ShareFetchRequest:
		g := "g"
		r.GroupID = &g
	case *kmsg.ShareAcknowledgeRequest:
		g := "g"
		r.GroupID = &g
	case *kmsg.DescribeShareGroupOffsetsRequest:
		r.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "g"}}
	case *kmsg.AlterShareGroupOffsetsRequest:
		r.GroupID = "g"
	case *kmsg.DeleteShareGroupOffsetsRequest:
		r.GroupID = "g"
	case *kmsg.InitProducerIDRequest:
		id := "tx"
		r.TransactionalID = &id
	case *kmsg.AddPartitionsToTxnRequest:
		r.TransactionalID = "tx"
	case *kmsg.AddOffsetsToTxnRequest:
		r.TransactionalID, r.Group = "tx", "g"
	case *kmsg.EndTxnRequest:
		r.TransactionalID = "tx"
	case *kmsg.TxnOffsetCommitRequest:
		r.TransactionalID, r.Group = "tx", "g"
	case *kmsg.DescribeTransactionsRequest:
		r.TransactionalIDs = []string{"tx"}
	}
}

// TestACLUnderJWTCeiling: with a broker JWT login, the token's role is a
// ceiling the ACLs never raise (a read-only token with ALL on every topic
// still cannot produce), and under it the ACLs decide (a write-only token
// needs a WRITE binding for its sub, User:svc).
func TestACLUnderJWTCeiling(t *testing.T) {
	cfg := authn.DefaultConfig()
	cfg.Enabled, cfg.Secret, cfg.ClockSkew = true, testJWTSecret, 0
	v, err := authn.New(context.Background(), cfg, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	h, e := raftgroupstest.Start(t)
	az := acl.New(acl.Config{Enabled: true, Store: e.ACLStore(), Logger: quiet})
	n := serveBroker(t, h, e, func(c *Config) {
		c.ACL = az
		c.Listener.Authenticate = BrokerJWTs(v, false)
	})
	ctx := ctxFor(t)
	tenant := wire.DefaultTenant.String()
	mustBind := func(bs ...acl.Binding) {
		t.Helper()
		if err := az.Create(ctx, tenant, bs); err != nil {
			t.Fatal(err)
		}
	}
	mustBind(acl.Binding{Resource: acl.ResourceCluster, Name: acl.ClusterName, Pattern: acl.PatternLiteral, Principal: "User:svc", Host: "*", Op: acl.OpAll, Perm: acl.PermAllow})
	if _, err := kadm.NewClient(n.as("admin")).CreateTopics(ctx, 1, 1, nil, "ceil"); err != nil {
		t.Fatal(err)
	}
	produce := func(role string) error {
		return n.as(role, kgo.RecordRetries(1)).ProduceSync(ctx, &kgo.Record{Topic: "ceil", Value: []byte("v")}).FirstErr()
	}
	if err := produce("write-only"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("write-only without a WRITE binding: %v", err)
	}
	mustBind(acl.Binding{Resource: acl.ResourceTopic, Name: acl.WildcardName, Pattern: acl.PatternLiteral, Principal: "User:svc", Host: "*", Op: acl.OpAll, Perm: acl.PermAllow})
	if err := produce("write-only"); err != nil {
		t.Fatalf("write-only with ALL on every topic: %v", err)
	}
	if err := produce("read-only"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("read-only with ALL on every topic produced: %v", err)
	}
	mustBind(acl.Binding{Resource: acl.ResourceTopic, Name: "ceil", Pattern: acl.PatternLiteral, Principal: "User:svc", Host: "*", Op: acl.OpWrite, Perm: acl.PermDeny})
	if err := produce("admin"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("admin role under a DENY: %v", err)
	}
}

// BenchmarkACLProduce is what the ACL wrapper adds to a one-topic produce
// request, with the producer's one binding alone and among 1,000 prefixed
// ones of other principals.
func BenchmarkACLProduce(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprint("prefixed=", n), func(b *testing.B) {
			az := acl.New(acl.Config{Enabled: true, Store: acl.NewMemStore()})
			tenant := wire.DefaultTenant.String()
			var bs []acl.Binding
			for i := range n {
				name := fmt.Sprintf("team%d.svc%d.", i%37, i)
				if i%2 == 0 {
					name = fmt.Sprintf("t%d.", i)
				}
				bs = append(bs, acl.Binding{Resource: acl.ResourceTopic, Name: name, Pattern: acl.PatternPrefixed, Principal: fmt.Sprintf("User:app%d", i%50), Host: "*", Op: acl.OpWrite, Perm: acl.PermAllow})
			}
			bs = append(bs, acl.Binding{Resource: acl.ResourceTopic, Name: "bench.", Pattern: acl.PatternPrefixed, Principal: "User:prod", Host: "*", Op: acl.OpWrite, Perm: acl.PermAllow})
			if err := az.Create(context.Background(), tenant, bs); err != nil {
				b.Fatal(err)
			}
			br := &Broker{cfg: Config{ACL: az}}
			k := aclCaller{a: az, r: acl.Request{Tenant: tenant, Principal: "User:prod", Host: "127.0.0.1"}}
			req := kmsg.NewPtrProduceRequest()
			req.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench.acl"}}
			resp := kmsg.NewPtrProduceResponse()
			h := func(context.Context, *kafka.Conn, kmsg.Request) (kmsg.Response, error) { return resp, nil }
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if r, _ := br.aclProduce(ctx, nil, k, req, h); r != resp {
					b.Fatal("refused")
				}
			}
		})
	}
}

// TestACLAutoCreateNeedsCreate: automatic topic creation (Metadata,
// Produce) needs CREATE on the topic or the cluster by ACL, as
// CreateTopics does: WRITE alone creates nothing.
func TestACLAutoCreateNeedsCreate(t *testing.T) {
	n := startACLNode(t)
	adm := kadm.NewClient(loginAs(n, "admin", "x"))
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("auto.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpWrite))
	alice := loginAs(n, "alice", "x")
	if resp := metadata(t, alice, true, "auto.a"); resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("metadata creating auto.a without CREATE: %+v", resp.Topics)
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "auto.a"); ok {
		t.Fatal("auto.a was created without CREATE")
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "auto.b"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = mustBatch(t, []byte("v"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctxFor(t), alice); err != nil || resp.Topics[0].Partitions[0].ErrorCode == 0 {
		t.Fatalf("produce creating auto.b without CREATE: %v %+v", err, resp)
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "auto.b"); ok {
		t.Fatal("auto.b was created without CREATE")
	}
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("auto.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpCreate))
	if resp := metadata(t, alice, true, "auto.a"); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata creating auto.a with CREATE: %+v", resp.Topics)
	}
}

// TestACLPartialAnswers: requests listing several resources serve the
// allowed ones and answer the refused ones with their error, as Kafka
// does: CreateTopics, DescribeConfigs, ListOffsets, Fetch, DeleteTopics.
func TestACLPartialAnswers(t *testing.T) {
	n := startACLNode(t)
	adm := kadm.NewClient(loginAs(n, "admin", "x"))
	ctx := ctxFor(t)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "mine.a", "theirs.a"); err != nil {
		t.Fatal(err)
	}
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("mine.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:dan").Operations(kadm.OpAll))
	dan := loginAs(n, "dan", "x")
	dadm := kadm.NewClient(dan) // kadm's own calls that look topics up first stop at a refused one, as with Kafka

	created, err := dadm.CreateTopics(ctx, 1, 1, nil, "mine.b", "theirs.b")
	if err != nil || created["mine.b"].Err != nil || !errors.Is(created["theirs.b"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create: %v %+v", err, created)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	for _, topic := range []string{"mine.a", "theirs.a"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		dc.Resources = append(dc.Resources, r)
	}
	dresp, err := dc.RequestWith(ctx, dan)
	if err != nil || len(dresp.Resources) != 2 {
		t.Fatalf("describe configs: %v %+v", err, dresp)
	}
	for _, rc := range dresp.Resources {
		switch {
		case rc.ResourceName == "mine.a" && (rc.ErrorCode != 0 || len(rc.Configs) == 0):
			t.Fatalf("configs of mine.a: %+v", rc)
		case rc.ResourceName == "theirs.a" && rc.ErrorCode != kerr.TopicAuthorizationFailed.Code:
			t.Fatalf("configs of theirs.a: %+v", rc)
		}
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MaxBytes = 10, 1<<20
	for _, topic := range []string{"mine.a", "theirs.a"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
	}
	fresp, err := fetch.RequestWith(ctx, dan)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, ft := range fresp.Topics {
		codes[ft.Topic] = ft.Partitions[0].ErrorCode
	}
	if fresp.ErrorCode != 0 || len(codes) != 2 || codes["mine.a"] != 0 || codes["theirs.a"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch: top %d, %v", fresp.ErrorCode, codes)
	}
	// Only refused: an answer with the errors alone.
	fetch.Topics = fetch.Topics[1:]
	if fresp, err = fetch.RequestWith(ctx, dan); err != nil || fresp.ErrorCode != 0 || len(fresp.Topics) != 1 ||
		fresp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch of theirs.a alone: %v %+v", err, fresp)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	for _, topic := range []string{"mine.a", "theirs.a"} {
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
	}
	// Straight to the node: kgo would look the partitions' leaders up
	// first, and stop at the refused topic.
	raw, err := dan.SeedBrokers()[0].Request(ctx, lo)
	if err != nil {
		t.Fatal(err)
	}
	lresp := raw.(*kmsg.ListOffsetsResponse)
	codes = map[string]int16{}
	for _, lt := range lresp.Topics {
		codes[lt.Topic] = lt.Partitions[0].ErrorCode
	}
	if len(codes) != 2 || codes["mine.a"] != 0 || codes["theirs.a"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("list offsets: %v", codes)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 10000
	for _, topic := range []string{"mine.b", "theirs.a"} {
		del.TopicNames = append(del.TopicNames, topic)
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		del.Topics = append(del.Topics, dt)
	}
	delResp, err := del.RequestWith(ctx, dan)
	if err != nil {
		t.Fatal(err)
	}
	codes = map[string]int16{}
	for _, dt := range delResp.Topics {
		codes[*dt.Topic] = dt.ErrorCode
	}
	if len(codes) != 2 || codes["mine.b"] != 0 || codes["theirs.a"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("delete: %v", codes)
	}
	if _, ok := n.engine.KafkaTopic(wire.DefaultTenant, "theirs.a"); !ok {
		t.Fatal("theirs.a was deleted")
	}
}
