package proxy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthorizationCodeIsKafkas: a suspended cluster refuses each request
// with the authorization error Kafka gives when the request's resource is
// refused: cluster-level keys (ACLs, log dirs, leader elections,
// reassignments, client quotas, SCRAM credentials, DescribeCluster)
// CLUSTER_AUTHORIZATION_FAILED, the transaction keys (whose first check is
// the transactional id, TxnOffsetCommit and AddOffsetsToTxn included)
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, group keys (share groups too)
// GROUP_AUTHORIZATION_FAILED, and the rest, DescribeProducers with them
// (Kafka checks DESCRIBE on the topic), TOPIC_AUTHORIZATION_FAILED.
func TestAuthorizationCodeIsKafkas(t *testing.T) {
	want := map[kmsg.Key]*kerr.Error{
		kmsg.DescribeACLs: kerr.ClusterAuthorizationFailed, kmsg.CreateACLs: kerr.ClusterAuthorizationFailed,
		kmsg.DeleteACLs: kerr.ClusterAuthorizationFailed, kmsg.DescribeLogDirs: kerr.ClusterAuthorizationFailed,
		kmsg.AlterReplicaLogDirs: kerr.ClusterAuthorizationFailed, kmsg.ElectLeaders: kerr.ClusterAuthorizationFailed,
		kmsg.AlterPartitionAssignments: kerr.ClusterAuthorizationFailed, kmsg.ListPartitionReassignments: kerr.ClusterAuthorizationFailed,
		kmsg.DescribeClientQuotas: kerr.ClusterAuthorizationFailed, kmsg.AlterClientQuotas: kerr.ClusterAuthorizationFailed,
		kmsg.DescribeUserSCRAMCredentials: kerr.ClusterAuthorizationFailed, kmsg.AlterUserSCRAMCredentials: kerr.ClusterAuthorizationFailed,
		kmsg.DescribeCluster: kerr.ClusterAuthorizationFailed,

		kmsg.InitProducerID: kerr.TransactionalIDAuthorizationFailed, kmsg.AddPartitionsToTxn: kerr.TransactionalIDAuthorizationFailed,
		kmsg.AddOffsetsToTxn: kerr.TransactionalIDAuthorizationFailed, kmsg.EndTxn: kerr.TransactionalIDAuthorizationFailed,
		kmsg.TxnOffsetCommit: kerr.TransactionalIDAuthorizationFailed, kmsg.DescribeTransactions: kerr.TransactionalIDAuthorizationFailed,
		kmsg.ListTransactions: kerr.TransactionalIDAuthorizationFailed,

		kmsg.FindCoordinator: kerr.GroupAuthorizationFailed, kmsg.OffsetCommit: kerr.GroupAuthorizationFailed,
		kmsg.OffsetFetch: kerr.GroupAuthorizationFailed, kmsg.JoinGroup: kerr.GroupAuthorizationFailed,
		kmsg.DeleteGroups: kerr.GroupAuthorizationFailed, kmsg.ConsumerGroupHeartbeat: kerr.GroupAuthorizationFailed,
		kmsg.ShareGroupHeartbeat: kerr.GroupAuthorizationFailed, kmsg.ShareGroupDescribe: kerr.GroupAuthorizationFailed,
		kmsg.ShareFetch: kerr.GroupAuthorizationFailed, kmsg.ShareAcknowledge: kerr.GroupAuthorizationFailed,
		kmsg.DescribeShareGroupOffsets: kerr.GroupAuthorizationFailed, kmsg.AlterShareGroupOffsets: kerr.GroupAuthorizationFailed,
		kmsg.DeleteShareGroupOffsets: kerr.GroupAuthorizationFailed,

		kmsg.Produce: kerr.TopicAuthorizationFailed, kmsg.Fetch: kerr.TopicAuthorizationFailed,
		kmsg.Metadata: kerr.TopicAuthorizationFailed, kmsg.CreateTopics: kerr.TopicAuthorizationFailed,
		kmsg.DeleteRecords: kerr.TopicAuthorizationFailed, kmsg.DescribeProducers: kerr.TopicAuthorizationFailed,
		kmsg.DescribeTopicPartitions: kerr.TopicAuthorizationFailed,
	}
	for key, code := range want {
		if got := authorizationCode(int16(key)); got != code.Code {
			t.Errorf("%s: %s, want %s", kmsg.NameForKey(int16(key)), kerr.ErrorForCode(got), code)
		}
	}
}
