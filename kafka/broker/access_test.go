package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
)

// tokens are the principals of the access table test: a token with no
// role, one per role, and one holding both read-only and write-only (which
// passes neither read-write nor admin, as over HTTP).
var tokens = []struct {
	name  string
	roles authn.RoleSet
}{
	{"no role", authn.Roles()},
	{"read-only", authn.Roles(authn.RoleReadOnly)},
	{"write-only", authn.Roles(authn.RoleWriteOnly)},
	{"read-write", authn.Roles(authn.RoleReadWrite)},
	{"admin", authn.Roles(authn.RoleAdmin)},
	{"read-only+write-only", authn.Roles(authn.RoleReadOnly, authn.RoleWriteOnly)},
}

// Short names for the answers below.
const (
	ok = int16(0)
	T  = int16(29) // TOPIC_AUTHORIZATION_FAILED
	G  = int16(30) // GROUP_AUTHORIZATION_FAILED
	C  = int16(31) // CLUSTER_AUTHORIZATION_FAILED
	X  = int16(53) // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
)

// wantAccess is what each token gets for each API key, in the order of
// tokens, written from the HTTP levels of spec §2.2 and Kafka's ACL
// operations rather than from access.go: describing is open to every role
// (every Kafka operation implies DESCRIBE), reading data and group state is
// read-only (HTTP fetch and GETs), producing is write-only (HTTP push),
// moving a group's positions — committing, and group membership, which
// hands out partitions and commits — is read-write (HTTP pop and ack), and
// creating, deleting and altering topics and groups is admin (HTTP DELETE
// of queues and groups; Kafka's CREATE, DELETE, ALTER).
var wantAccess = map[kmsg.Key][6]int16{
	kmsg.Produce:                      {T, T, ok, ok, ok, ok},
	kmsg.Fetch:                        {T, ok, T, ok, ok, ok},
	kmsg.ListOffsets:                  {T, ok, T, ok, ok, ok},
	kmsg.OffsetForLeaderEpoch:         {T, ok, T, ok, ok, ok}, // offsets, as ListOffsets
	kmsg.Metadata:                     {T, ok, ok, ok, ok, ok},
	kmsg.OffsetCommit:                 {G, G, G, ok, ok, G},
	kmsg.OffsetFetch:                  {G, ok, G, ok, ok, ok},
	kmsg.FindCoordinator:              {G, ok, ok, ok, ok, ok},
	kmsg.JoinGroup:                    {G, G, G, ok, ok, G},
	kmsg.Heartbeat:                    {G, G, G, ok, ok, G},
	kmsg.LeaveGroup:                   {G, G, G, ok, ok, G},
	kmsg.SyncGroup:                    {G, G, G, ok, ok, G},
	kmsg.DescribeGroups:               {G, ok, G, ok, ok, ok},
	kmsg.ListGroups:                   {G, ok, G, ok, ok, ok},
	kmsg.CreateTopics:                 {T, T, T, T, ok, T},
	kmsg.DeleteTopics:                 {T, T, T, T, ok, T},
	kmsg.InitProducerID:               {X, X, ok, ok, ok, ok}, // transactional; idempotent below
	kmsg.AddPartitionsToTxn:           {X, X, ok, ok, ok, ok},
	kmsg.AddOffsetsToTxn:              {X, X, G, ok, ok, G},
	kmsg.EndTxn:                       {X, X, ok, ok, ok, ok},
	kmsg.TxnOffsetCommit:              {X, X, G, ok, ok, G},
	kmsg.DescribeProducers:            {T, ok, T, ok, ok, ok}, // READ on the topic, as Kafka
	kmsg.DescribeTransactions:         {X, ok, ok, ok, ok, ok},
	kmsg.ListTransactions:             {ok, ok, ok, ok, ok, ok}, // the ids a login may not describe are left out
	kmsg.DescribeACLs:                 {C, ok, ok, ok, ok, ok},
	kmsg.CreateACLs:                   {C, C, C, C, ok, C},
	kmsg.DeleteACLs:                   {C, C, C, C, ok, C},
	kmsg.DescribeConfigs:              {T, ok, T, ok, ok, ok},
	kmsg.AlterConfigs:                 {T, T, T, T, ok, T},
	kmsg.DescribeLogDirs:              {C, ok, C, ok, ok, ok},
	kmsg.CreatePartitions:             {T, T, T, T, ok, T},
	kmsg.DeleteRecords:                {T, T, T, T, ok, T}, // DELETE on the topic, as HTTP DELETE of a queue
	kmsg.ElectLeaders:                 {C, C, C, C, ok, C}, // ALTER on the cluster
	kmsg.AlterPartitionAssignments:    {C, C, C, C, ok, C}, // ALTER on the cluster
	kmsg.ListPartitionReassignments:   {C, C, C, C, ok, C}, // DESCRIBE on the cluster, admin as the other operators' keys
	kmsg.DescribeUserSCRAMCredentials: {C, C, C, C, ok, C}, // logins: admin only
	kmsg.AlterUserSCRAMCredentials:    {C, C, C, C, ok, C},
	kmsg.DescribeClientQuotas:         {C, C, C, C, ok, C}, // as the SCRAM keys
	kmsg.AlterClientQuotas:            {C, C, C, C, ok, C},
	kmsg.IncrementalAlterConfigs:      {T, T, T, T, ok, T},
	kmsg.DescribeCluster:              {C, ok, ok, ok, ok, ok},
	kmsg.DescribeTopicPartitions:      {T, ok, ok, ok, ok, ok}, // paged Metadata
	kmsg.DeleteGroups:                 {G, G, G, G, ok, G},
	kmsg.OffsetDelete:                 {G, G, G, G, ok, G},
	kmsg.ConsumerGroupHeartbeat:       {G, G, G, ok, ok, G},
	kmsg.ConsumerGroupDescribe:        {G, ok, G, ok, ok, ok},
	kmsg.ShareGroupHeartbeat:          {G, G, G, ok, ok, G},
	kmsg.ShareGroupDescribe:           {G, ok, G, ok, ok, ok},
	kmsg.ShareFetch:                   {T, G, T, ok, ok, G}, // acquiring and acknowledging move the group, as HTTP pop and ack
	kmsg.ShareAcknowledge:             {T, G, T, ok, ok, G},
	kmsg.DescribeShareGroupOffsets:    {G, ok, G, ok, ok, ok},
	kmsg.AlterShareGroupOffsets:       {G, G, G, ok, ok, G},
	kmsg.DeleteShareGroupOffsets:      {G, G, G, G, ok, G},
}

// TestAccessTable checks every API key the broker serves against every
// token, so no key is open by omission and no role passes more than its
// HTTP level.
func TestAccessTable(t *testing.T) {
	served := (&Broker{}).handlers()
	for key := range served {
		if _, ok := wantAccess[kmsg.Key(key)]; !ok {
			t.Errorf("%s is served but has no expected access", kafka.KeyName(key))
		}
	}
	for key, want := range wantAccess {
		if _, ok := served[int16(key)]; !ok {
			t.Errorf("%s has an expected access but is not served", kafka.KeyName(int16(key)))
			continue
		}
		req := kmsg.RequestForKey(int16(key))
		if r, ok := req.(*kmsg.InitProducerIDRequest); ok {
			r.TransactionalID = kmsg.StringPtr("txn")
		}
		check(t, int16(key), req, want)
	}
	// Special cases: an idempotent producer id is a cluster permission,
	// and a transaction coordinator is found by transactional id.
	idem := kmsg.NewPtrInitProducerIDRequest()
	check(t, int16(kmsg.InitProducerID), idem, [6]int16{C, C, ok, ok, ok, ok})
	txnCoord := kmsg.NewPtrFindCoordinatorRequest()
	txnCoord.CoordinatorType = 1
	check(t, int16(kmsg.FindCoordinator), txnCoord, [6]int16{X, ok, ok, ok, ok, ok})
	// Static users (no token) are not limited.
	for key := range served {
		if code := refusal(key, nil, kmsg.RequestForKey(key)); code != 0 {
			t.Errorf("%s refused a static user with %s", kafka.KeyName(key), kerr.ErrorForCode(code))
		}
	}
}

func check(t *testing.T, key int16, req kmsg.Request, want [6]int16) {
	t.Helper()
	for i, tok := range tokens {
		p := &authn.Principal{Subject: "svc", Roles: tok.roles}
		if got := refusal(key, p, req); got != want[i] {
			t.Errorf("%s as %s: got %s, want %s", kafka.KeyName(key), tok.name, codeName(got), codeName(want[i]))
		}
	}
}

func codeName(code int16) string {
	if code == 0 {
		return "allowed"
	}
	return kerr.ErrorForCode(code).Error()
}

// The built-in keys (ApiVersions, the SASL keys) are the package kafka's,
// served before any login, and never reach the broker's table.
func TestBuiltInKeysAreNotInTheAccessTable(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate} {
		if _, listed := apiAccess[key]; listed {
			t.Errorf("%s is in the access table", kafka.KeyName(int16(key)))
		}
		if slices.Contains(keysOf((&Broker{}).handlers()), int16(key)) {
			t.Errorf("the broker serves %s", kafka.KeyName(int16(key)))
		}
	}
}

func keysOf(m map[int16]kafka.Handler) []int16 {
	out := make([]int16, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
