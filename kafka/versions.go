package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// VersionRange is the window of versions queen accepts for one API key.
type VersionRange struct {
	Min, Max int16
}

// Contains reports whether v is inside the window.
func (r VersionRange) Contains(v int16) bool { return v >= r.Min && v <= r.Max }

// supportedVersions is the one source of truth for the API keys and version
// windows queen speaks (spec queen.md §3.4). A key is advertised by
// ApiVersions only once a handler for it is registered; the controller
// keys are absent on purpose.
var supportedVersions = map[int16]VersionRange{
	0:  {3, 10}, // Produce: v3 is the RecordBatch v2 floor; v10 leader-change hints (KIP-951); v11 is KIP-890
	1:  {4, 9},  // Fetch: v9 CurrentLeaderEpoch; sessions (v7) declined; v10+ nothing we need
	2:  {1, 5},  // ListOffsets: v7 MAX_TIMESTAMP not supported
	3:  {0, 12}, // Metadata: v10 topic ids, v12 lookups by id; v13 top-level error code
	8:  {2, 9},  // OffsetCommit: v9 KIP-848 member epochs; v10 topic ids
	9:  {1, 7},  // OffsetFetch: v8 is multi-group
	10: {0, 3},  // FindCoordinator: v4 is batched
	11: {0, 9},  // JoinGroup: v5 static membership, v9 KIP-814 skip assignment
	12: {0, 4},  // Heartbeat: v3 group_instance_id
	13: {0, 5},  // LeaveGroup: v3 batched, by instance id
	14: {0, 5},  // SyncGroup: v3 group_instance_id, v5 protocol type and name
	15: {0, 5},  // DescribeGroups: v4 group_instance_id
	16: {0, 5},  // ListGroups: v5 group types (all "classic")
	17: {0, 1},  // SaslHandshake: both flows
	18: {0, 3},  // ApiVersions: v4 clients retry at v3
	19: {2, 6},  // CreateTopics: v7 topic ids
	20: {1, 5},  // DeleteTopics
	21: {0, 2},  // DeleteRecords: moves the log start (LogCleanCmd), HTTP's too
	22: {0, 4},  // InitProducerId: v5 is KIP-890
	23: {0, 4},  // OffsetForLeaderEpoch: the epoch ends at the high-water mark (23_offset_for_leader_epoch.go)
	24: {0, 3},  // AddPartitionsToTxn
	25: {0, 3},  // AddOffsetsToTxn
	26: {0, 3},  // EndTxn
	28: {0, 3},  // TxnOffsetCommit
	29: {1, 3},  // DescribeAcls: SECURITY_DISABLED unless QUEEN_ACLS (tenancy/acl)
	30: {1, 3},  // CreateAcls: SECURITY_DISABLED unless QUEEN_ACLS
	31: {1, 3},  // DeleteAcls: SECURITY_DISABLED unless QUEEN_ACLS
	32: {1, 4},  // DescribeConfigs
	33: {0, 2},  // AlterConfigs
	35: {1, 4},  // DescribeLogDirs
	36: {0, 1},  // SaslAuthenticate: session_lifetime_ms = 0
	37: {0, 3},  // CreatePartitions: increase only
	42: {0, 2},  // DeleteGroups
	43: {0, 2},  // ElectLeaders: a raft leadership transfer to the group's preferred node
	44: {0, 1},  // IncrementalAlterConfigs
	45: {0, 1},  // AlterPartitionReassignments: every node replicates every partition; only the current set is accepted
	46: {0, 0},  // ListPartitionReassignments: never one in progress
	47: {0, 0},  // OffsetDelete
	48: {0, 1},  // DescribeClientQuotas: KIP-546, user and client-id entities
	49: {0, 1},  // AlterClientQuotas: replicated in the default tenant's KV
	50: {0, 0},  // DescribeUserScramCredentials: KIP-554, managed users only
	51: {0, 0},  // AlterUserScramCredentials: replicated in the default tenant's KV
	60: {0, 1},  // DescribeCluster: v2 endpoint types
	61: {0, 0},  // DescribeProducers: KIP-664
	65: {0, 0},  // DescribeTransactions: KIP-664
	66: {0, 2},  // ListTransactions: v1 duration filter, v2 transactional id pattern
	68: {0, 1},  // ConsumerGroupHeartbeat: KIP-848; v1 member-named, regex
	69: {0, 1},  // ConsumerGroupDescribe
	75: {0, 0},  // DescribeTopicPartitions: KIP-966 paging; no eligible leader replicas
	76: {1, 1},  // ShareGroupHeartbeat: KIP-932 (v0 was early access)
	77: {1, 1},  // ShareGroupDescribe
	78: {1, 2},  // ShareFetch: v2 KIP-1206 record limits, KIP-1222 renew
	79: {1, 2},  // ShareAcknowledge
	90: {0, 1},  // DescribeShareGroupOffsets: v1 lag
	91: {0, 0},  // AlterShareGroupOffsets
	92: {0, 0},  // DeleteShareGroupOffsets
}

// SupportedVersions returns the version window queen accepts for key, and
// false for a key queen does not speak.
func SupportedVersions(key int16) (VersionRange, bool) {
	r, ok := supportedVersions[key]
	return r, ok
}

// KeyName is the protocol name of key ("Produce", "ApiVersions", ...), for
// logs.
func KeyName(key int16) string { return kmsg.NameForKey(key) }
