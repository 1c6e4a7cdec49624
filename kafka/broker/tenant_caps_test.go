package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func commitGroupless(t *testing.T, n *testNode, group, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t), n.client())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func joinGroup(t *testing.T, n *testNode, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 3 // no MEMBER_ID_REQUIRED round trip
	req.Group, req.ProtocolType = group, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	resp, err := req.RequestWith(ctxFor(t), n.client())
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

func initTxnID(t *testing.T, n *testNode, id string) int16 {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 10000
	resp, err := req.RequestWith(ctxFor(t), n.client())
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

// TestTenantGroupAndTxnIDCaps (issue 33 item 10): a tenant made 3,000
// consumer groups and 3,000 transactional ids in 4 s. Past the caps a new
// group is GROUP_AUTHORIZATION_FAILED and a new transactional id
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; those already held go on working.
func TestTenantGroupAndTxnIDCaps(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxTenantGroups, c.MaxTenantTxnIDs = 3, 3 })
	if codes := createTopics(t, n, map[string]int32{"t": 1}); codes["t"] != 0 {
		t.Fatalf("create: %v", codes)
	}
	for i := range 3 {
		if code := commitGroupless(t, n, fmt.Sprintf("g%d", i), "t"); code != 0 {
			t.Fatalf("group %d: %s", i, kerr.ErrorForCode(code))
		}
	}
	if code := commitGroupless(t, n, "g3", "t"); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("a fourth group's commit: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := joinGroup(t, n, "g4"); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("a fifth group's join: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := commitGroupless(t, n, "g1", "t"); code != 0 {
		t.Fatalf("a held group's commit: %s", kerr.ErrorForCode(code))
	}
	if code := joinGroup(t, n, "g2"); code != 0 && code != kerr.MemberIDRequired.Code {
		t.Fatalf("a held group's join: %s", kerr.ErrorForCode(code))
	}

	for i := range 3 {
		if code := initTxnID(t, n, fmt.Sprintf("tx%d", i)); code != 0 {
			t.Fatalf("txn id %d: %s", i, kerr.ErrorForCode(code))
		}
	}
	if code := initTxnID(t, n, "tx3"); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("a fourth transactional id: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := initTxnID(t, n, "tx0"); code != 0 {
		t.Fatalf("a held transactional id again: %s", kerr.ErrorForCode(code))
	}
}

// TestGroupIDsWithBidiOrControlCharactersAreRefused (issue 33 item 13): a
// group id holding U+202E was accepted and shown reversed in listings and
// the dashboard. A new group id must be text without control, bidi or
// invisible format characters, as HTTP names are: INVALID_GROUP_ID.
func TestGroupIDsWithBidiOrControlCharactersAreRefused(t *testing.T) {
	n := startNode(t, nil)
	if codes := createTopics(t, n, map[string]int32{"t": 1}); codes["t"] != 0 {
		t.Fatalf("create: %v", codes)
	}
	for _, bad := range []string{"pay\u202Etxt.exe", "a\x00b", "line\nbreak", "zero\u200Bwidth", "\xff\xfe"} {
		if code := commitGroupless(t, n, bad, "t"); code != kerr.InvalidGroupID.Code {
			t.Errorf("commit as %q: %v, want INVALID_GROUP_ID", bad, kerr.ErrorForCode(code))
		}
		if code := joinGroup(t, n, bad); code != kerr.InvalidGroupID.Code {
			t.Errorf("join as %q: %v, want INVALID_GROUP_ID", bad, kerr.ErrorForCode(code))
		}
	}
	for _, good := range []string{"café-consumers", "עברית", "👩\u200d💻", "team/app"} {
		if code := commitGroupless(t, n, good, "t"); code != 0 {
			t.Errorf("commit as %q: %v", good, kerr.ErrorForCode(code))
		}
	}
}

// TestTenantTxnTimeoutCap (issue 33 item 9): a tenant's producer holding a
// transaction open holds back HTTP pops of its partitions (the last stable
// offset) for as long as its transaction timeout, which could be the
// node's 15 minutes. A tenant may ask for at most MaxTenantTxnTimeout;
// beyond it InitProducerId answers INVALID_TRANSACTION_TIMEOUT, as Kafka
// does beyond transaction.max.timeout.ms. The default tenant (no tenancy)
// keeps the node's cap.
func TestTenantTxnTimeoutCap(t *testing.T) {
	const tenant = "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c"
	n := startNode(t, func(c *Config) {
		c.Listener.Authenticate = StaticUsers(map[string]string{tenant: "pw"}, true)
		c.MaxTenantTxnTimeout = 30 * time.Second
	})
	cl := n.client(kgo.SASL(plain.Auth{User: tenant, Pass: "pw"}.AsMechanism()))
	init := func(id string, timeout time.Duration) int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), int32(timeout.Milliseconds())
		resp, err := req.RequestWith(ctxFor(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := init("long", time.Minute); code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("a tenant's 1 min transaction timeout: %v, want INVALID_TRANSACTION_TIMEOUT", kerr.ErrorForCode(code))
	}
	if code := init("short", 30*time.Second); code != 0 {
		t.Fatalf("a tenant's 30 s transaction timeout: %v", kerr.ErrorForCode(code))
	}
	plainNode := startNode(t, func(c *Config) { c.MaxTenantTxnTimeout = 30 * time.Second })
	if code := initTxnID(t, plainNode, "x"); code != 0 {
		t.Fatalf("the default tenant: %v", kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("long"), int32(10*time.Minute/time.Millisecond)
	if resp, err := req.RequestWith(ctxFor(t), plainNode.client()); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("the default tenant's 10 min transaction timeout: %v %v", err, resp)
	}
}

// TestTopicNameErrorsKeepNonASCII (issue 33 item 13): the refusal of a
// topic name named its first bad byte, so "café" was refused for 'Ã'. The
// text names the character, whole.
func TestTopicNameErrorsKeepNonASCII(t *testing.T) {
	for name, want := range map[string]string{
		"café":        `"café" has 'é'`,
		"a\u202Eb":    `"a\u202eb" has '\u202e'`,
		"bad\xffname": `"bad\xffname" has '\xff'`,
	} {
		err := checkTopicName(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkTopicName(%q) = %v, want it to say %s", name, err, want)
		}
	}
}
