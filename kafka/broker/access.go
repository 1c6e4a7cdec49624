package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
)

// need is one permission a request needs from a connection that logged in
// with a broker JWT: a token role passing any one of levels grants it, and
// the request is refused with code without it.
type need struct {
	levels []authn.Level
	code   int16
}

// The HTTP levels of spec §2.2, as Kafka permissions on one kind of
// resource (refused with that resource's authorization error).
var (
	// describe is Kafka's DESCRIBE, which every other operation implies:
	// any role grants it (a producer describes what it writes, a consumer
	// what it reads), a token with no role does not, as it passes no HTTP
	// route but the public ones.
	describe = []authn.Level{authn.LevelReadOnly, authn.LevelWriteOnly}
	// readOnly reads data and group state (HTTP fetch and the GETs).
	readOnly = []authn.Level{authn.LevelReadOnly}
	// writeOnly appends records (HTTP push).
	writeOnly = []authn.Level{authn.LevelWriteOnly}
	// readWrite moves a consumer group's positions (HTTP pop and ack):
	// committing offsets, in or out of a transaction, and group
	// membership, which hands out partitions and commits them.
	readWrite = []authn.Level{authn.LevelReadWrite}
	// admin creates, deletes and alters topics and groups (HTTP DELETE of
	// queues and groups; Kafka's CREATE, DELETE and ALTER).
	admin = []authn.Level{authn.LevelAdmin}
)

func topic(levels []authn.Level) need { return need{levels, kerr.TopicAuthorizationFailed.Code} }
func group(levels []authn.Level) need { return need{levels, kerr.GroupAuthorizationFailed.Code} }
func cluster(levels []authn.Level) need {
	return need{levels, kerr.ClusterAuthorizationFailed.Code}
}
func txnID(levels []authn.Level) need {
	return need{levels, kerr.TransactionalIDAuthorizationFailed.Code}
}

// apiAccess is THE table of what each API key the broker serves needs, in
// the order Kafka checks it (the first need missing gives the answer). It
// lists every key: New refuses to serve a key it does not list. Automatic
// topic creation (Metadata, Produce) needs what CreateTopics needs, as in
// Kafka (mayCreateTopics). ApiVersions and the SASL keys are package
// kafka's, served before any login.
var apiAccess = map[kmsg.Key][]need{
	kmsg.Produce:              {topic(writeOnly)},
	kmsg.Fetch:                {topic(readOnly)},
	kmsg.ListOffsets:          {topic(readOnly)},
	kmsg.OffsetForLeaderEpoch: {topic(readOnly)},
	kmsg.Metadata:             {topic(describe)},
	kmsg.DescribeConfigs:      {topic(readOnly)},
	kmsg.DescribeLogDirs:      {cluster(readOnly)},
	kmsg.DescribeCluster:      {cluster(describe)},
	// KIP-966's paged Metadata: Kafka's DESCRIBE on each topic.
	kmsg.DescribeTopicPartitions: {topic(describe)},

	kmsg.FindCoordinator: {group(describe)}, // a transactional id's: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	kmsg.OffsetFetch:     {group(readOnly)},
	kmsg.DescribeGroups:  {group(readOnly)},
	kmsg.ListGroups:      {group(readOnly)},
	kmsg.OffsetCommit:    {group(readWrite)},
	kmsg.JoinGroup:       {group(readWrite)},
	kmsg.SyncGroup:       {group(readWrite)},
	kmsg.Heartbeat:       {group(readWrite)},
	kmsg.LeaveGroup:      {group(readWrite)},

	kmsg.ConsumerGroupHeartbeat: {group(readWrite)},
	kmsg.ConsumerGroupDescribe:  {group(readOnly)},
	kmsg.ShareGroupHeartbeat:    {group(readWrite)},
	kmsg.ShareGroupDescribe:     {group(readOnly)},
	// A share fetch acquires records for the group and an
	// acknowledgement moves its positions: Kafka's READ on the topic and
	// on the group; here the group's is HTTP pop's read-write.
	kmsg.ShareFetch:       {topic(readOnly), group(readWrite)},
	kmsg.ShareAcknowledge: {topic(readOnly), group(readWrite)},
	// A share group's offsets are its positions: described as OffsetFetch,
	// altered as OffsetCommit, deleted as OffsetDelete.
	kmsg.DescribeShareGroupOffsets: {group(readOnly)},
	kmsg.AlterShareGroupOffsets:    {group(readWrite)},
	kmsg.DeleteShareGroupOffsets:   {group(admin)},

	kmsg.InitProducerID:     {txnID(writeOnly)}, // an idempotent producer's: CLUSTER_AUTHORIZATION_FAILED
	kmsg.AddPartitionsToTxn: {txnID(writeOnly)},
	kmsg.EndTxn:             {txnID(writeOnly)},
	// Offsets committed with a transaction move the group's positions when
	// it commits: the transactional id's permission and the group's.
	kmsg.AddOffsetsToTxn: {txnID(writeOnly), group(readWrite)},
	kmsg.TxnOffsetCommit: {txnID(writeOnly), group(readWrite)},
	// Looking for hanging transactions (KIP-664), as Kafka checks it:
	// READ on each topic described, DESCRIBE on each transactional id.
	// ListTransactions needs nothing of the request: like Kafka, it leaves
	// out the ids the login may not describe (mayDescribeTxns).
	kmsg.DescribeProducers:    {topic(readOnly)},
	kmsg.DescribeTransactions: {txnID(describe)},
	kmsg.ListTransactions:     {},

	kmsg.CreateTopics:            {topic(admin)},
	kmsg.DeleteTopics:            {topic(admin)},
	kmsg.DeleteRecords:           {topic(admin)}, // Kafka's DELETE on the topic
	kmsg.CreatePartitions:        {topic(admin)},
	kmsg.AlterConfigs:            {topic(admin)},
	kmsg.IncrementalAlterConfigs: {topic(admin)},
	kmsg.DeleteGroups:            {group(admin)},
	kmsg.OffsetDelete:            {group(admin)},
	// The ACL keys (SECURITY_DISABLED unless QUEEN_ACLS): who may ask is
	// Kafka's (DESCRIBE, and ALTER on the cluster); with ACLs on, the
	// handlers also check those ACLs (29_30_31_acls.go).
	kmsg.DescribeACLs: {cluster(describe)},
	kmsg.CreateACLs:   {cluster(admin)},
	kmsg.DeleteACLs:   {cluster(admin)},
	// Kafka's ALTER on the cluster.
	kmsg.ElectLeaders: {cluster(admin)},
	// Kafka's ALTER (45) and DESCRIBE (46) on the cluster; admin as the
	// other operators' keys.
	kmsg.AlterPartitionAssignments:  {cluster(admin)},
	kmsg.ListPartitionReassignments: {cluster(admin)},
	// SCRAM users are logins: admin only, to describe them too (Kafka's
	// DESCRIBE and ALTER on the cluster).
	kmsg.DescribeUserSCRAMCredentials: {cluster(admin)},
	kmsg.AlterUserSCRAMCredentials:    {cluster(admin)},
	// Client quotas: as the SCRAM keys (Kafka's DESCRIBE_CONFIGS and
	// ALTER_CONFIGS on the cluster; a quota is an operator's setting).
	kmsg.DescribeClientQuotas: {cluster(admin)},
	kmsg.AlterClientQuotas:    {cluster(admin)},
}

// guard refuses a request whose connection logged in with a broker JWT
// whose roles lack one of the key's needs, with that need's authorization
// error for every part of the request.
func guard(key int16, h kafka.Handler) kafka.Handler {
	return func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
		if id, ok := identityOf(c); ok {
			if code := refusal(key, id.limits(), req); code != 0 {
				return kafka.ErrorResponse(req, code), nil
			}
		}
		return h(ctx, c, req)
	}
}

// refusal is the authorization error p gets for req (of API key key), 0
// when p may send it. A nil p (a QUEEN_KAFKA_SASL_USERS login) is not
// limited; a key missing from the table is refused to everyone else.
func refusal(key int16, p Limits, req kmsg.Request) int16 {
	if p == nil {
		return 0
	}
	needs, listed := apiAccess[kmsg.Key(key)]
	if !listed {
		return kerr.ClusterAuthorizationFailed.Code
	}
	for _, n := range needs {
		if grants(p, n.levels) {
			continue
		}
		switch r := req.(type) {
		case *kmsg.InitProducerIDRequest:
			// An idempotent (not transactional) producer's id is a
			// cluster permission in Kafka.
			if r.TransactionalID == nil || *r.TransactionalID == "" {
				return kerr.ClusterAuthorizationFailed.Code
			}
		case *kmsg.FindCoordinatorRequest:
			if r.CoordinatorType == 1 {
				return kerr.TransactionalIDAuthorizationFailed.Code
			}
		}
		return n.code
	}
	return 0
}

func grants(p Limits, levels []authn.Level) bool {
	for _, l := range levels {
		if p.Allows(l) {
			return true
		}
	}
	return false
}

// mayCreateTopics says whether c may create topics, by CreateTopics or
// automatically (Metadata, Produce): Kafka's CREATE, the same need for
// all three.
func mayCreateTopics(c *kafka.Conn) bool {
	id, ok := identityOf(c)
	return !ok || refusal(int16(kmsg.CreateTopics), id.limits(), kmsg.NewPtrCreateTopicsRequest()) == 0
}

// mayDescribeTxns says whether c may describe transactional ids, which
// ListTransactions lists only then: the need of DescribeTransactions.
func mayDescribeTxns(c *kafka.Conn) bool {
	id, ok := identityOf(c)
	return !ok || refusal(int16(kmsg.DescribeTransactions), id.limits(), kmsg.NewPtrDescribeTransactionsRequest()) == 0
}
