package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
)

// apiAccess is the access level each API key needs from a connection that
// logged in with a broker JWT, and the Kafka error it is refused with: the
// HTTP levels of spec §2.2 carried over (write-only may produce but not
// fetch, read-only may fetch and consume in groups but not produce, topic
// and group administration is admin). Keys not listed (Metadata,
// FindCoordinator, DescribeCluster, the ACL keys) are open to any
// authenticated connection: producers and consumers both need them.
var apiAccess = map[kmsg.Key]struct {
	level authn.Level
	code  int16
}{
	kmsg.Produce:                 {authn.LevelWriteOnly, kerr.TopicAuthorizationFailed.Code},
	kmsg.InitProducerID:          {authn.LevelWriteOnly, kerr.TransactionalIDAuthorizationFailed.Code},
	kmsg.AddPartitionsToTxn:      {authn.LevelWriteOnly, kerr.TransactionalIDAuthorizationFailed.Code},
	kmsg.AddOffsetsToTxn:         {authn.LevelWriteOnly, kerr.TransactionalIDAuthorizationFailed.Code},
	kmsg.EndTxn:                  {authn.LevelWriteOnly, kerr.TransactionalIDAuthorizationFailed.Code},
	kmsg.TxnOffsetCommit:         {authn.LevelWriteOnly, kerr.TransactionalIDAuthorizationFailed.Code},
	kmsg.Fetch:                   {authn.LevelReadOnly, kerr.TopicAuthorizationFailed.Code},
	kmsg.ListOffsets:             {authn.LevelReadOnly, kerr.TopicAuthorizationFailed.Code},
	kmsg.DescribeConfigs:         {authn.LevelReadOnly, kerr.TopicAuthorizationFailed.Code},
	kmsg.DescribeLogDirs:         {authn.LevelReadOnly, kerr.ClusterAuthorizationFailed.Code},
	kmsg.OffsetCommit:            {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.OffsetFetch:             {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.JoinGroup:               {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.SyncGroup:               {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.Heartbeat:               {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.LeaveGroup:              {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.DescribeGroups:          {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.ListGroups:              {authn.LevelReadOnly, kerr.GroupAuthorizationFailed.Code},
	kmsg.OffsetDelete:            {authn.LevelAdmin, kerr.GroupAuthorizationFailed.Code},
	kmsg.DeleteGroups:            {authn.LevelAdmin, kerr.GroupAuthorizationFailed.Code},
	kmsg.CreateTopics:            {authn.LevelAdmin, kerr.TopicAuthorizationFailed.Code},
	kmsg.DeleteTopics:            {authn.LevelAdmin, kerr.TopicAuthorizationFailed.Code},
	kmsg.CreatePartitions:        {authn.LevelAdmin, kerr.TopicAuthorizationFailed.Code},
	kmsg.AlterConfigs:            {authn.LevelAdmin, kerr.TopicAuthorizationFailed.Code},
	kmsg.IncrementalAlterConfigs: {authn.LevelAdmin, kerr.TopicAuthorizationFailed.Code},
}

// guard refuses a request whose connection logged in with a broker JWT
// whose roles do not pass the key's level, with the key's authorization
// error for every part of the request.
func guard(key int16, h kafka.Handler) kafka.Handler {
	if _, limited := apiAccess[kmsg.Key(key)]; !limited {
		return h
	}
	return func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
		if id, ok := identityOf(c); ok {
			if code := refusal(key, id.Principal, req); code != 0 {
				return kafka.ErrorResponse(req, code), nil
			}
		}
		return h(ctx, c, req)
	}
}

// refusal is the authorization error p gets for req (of API key key), 0
// when p may send it. A nil p (a QUEEN_KAFKA_SASL_USERS login) is not
// limited.
func refusal(key int16, p *authn.Principal, req kmsg.Request) int16 {
	acc, limited := apiAccess[kmsg.Key(key)]
	if !limited || p == nil || p.Allows(acc.level) {
		return 0
	}
	code := acc.code
	// An idempotent (not transactional) producer's id is a cluster
	// permission in Kafka.
	if r, ok := req.(*kmsg.InitProducerIDRequest); ok && (r.TransactionalID == nil || *r.TransactionalID == "") {
		code = kerr.ClusterAuthorizationFailed.Code
	}
	return code
}
