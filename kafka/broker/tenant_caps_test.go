package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
