// Package broker gives the Kafka API keys their meaning on top of the
// engine: a topic is a queue, Kafka partition i is the queue's partition
// with permanent index i, a produce is a push, a fetch is a read at an
// offset without a lease, a committed offset is the Queen consumer group's
// position (spec decisions 1–3, 8). One file per API key, named by key
// number, as franz-go's kfake does.
//
// Leadership follows placement (docs/placement.md): a partition is led by
// the node leading the raft group holding it, a consumer group or a
// transactional id is coordinated by the node leading the raft group its
// id hashes onto. It owns Kafka semantics: leadership answers
// (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR), record batch decoding and
// re-encoding, group coordination state held in the coordinator's memory,
// producer and transaction bookkeeping. It never touches raft or the store directly: every write is
// an engine command and every read an engine read. The wire itself (frames,
// versions, SASL, TLS) is package kafka's.
package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy/acl"
)

// Config is the Kafka facade's configuration, filled by cmd/queen from env
// (spec §3.6). Zero values take the defaults below.
type Config struct {
	Listener kafka.Config
	// Metrics receives the facade's series (metrics.go); cmd/queen passes
	// the set /metrics/prometheus writes. A private set when nil.
	Metrics *metrics.Set
	// NodeID is this node's broker id (its raft node id).
	NodeID int32
	// AdvertisedAddr is the host:port clients are told to reach this node
	// at (QUEEN_KAFKA_ADVERTISED_ADDR).
	AdvertisedAddr string
	// DefaultPartitions is the partition count of auto-created topics
	// (QUEEN_KAFKA_DEFAULT_PARTITIONS, spec decision 2: 1).
	DefaultPartitions int32
	// MaxPartitions bounds a topic's partitions (QUEEN_KAFKA_MAX_PARTITIONS).
	MaxPartitions int32
	// MaxPartitionsPerRequest bounds the partitions one CreateTopics or
	// CreatePartitions adds (QUEEN_KAFKA_MAX_PARTITIONS_PER_REQUEST), and
	// MaxTenantPartitions those a tenant's Kafka topics hold in all
	// (QUEEN_KAFKA_MAX_TENANT_PARTITIONS); see partition_caps.go.
	MaxPartitionsPerRequest int
	MaxTenantPartitions     int
	// MaxTenantGroups and MaxTenantTxnIDs bound a tenant's consumer groups
	// and transactional ids (QUEEN_KAFKA_MAX_TENANT_GROUPS,
	// QUEEN_KAFKA_MAX_TENANT_TRANSACTIONAL_IDS); see tenant_caps.go.
	MaxTenantGroups int
	MaxTenantTxnIDs int
	// MetadataMaxPartitions bounds the partitions of a topic Kafka clients
	// are shown (QUEEN_KAFKA_METADATA_MAX_PARTITIONS); see partition_caps.go.
	MetadataMaxPartitions int
	// TenantMaxInflightBytes bounds one tenant's request bytes in flight
	// on the node, in tenancy mode (tenant_inflight.go,
	// QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES).
	TenantMaxInflightBytes int
	// DedupWindow is how long idempotent-producer sequences are remembered
	// (QUEEN_KAFKA_DEDUP_WINDOW_SECONDS).
	DedupWindow time.Duration
	// Group session bounds and the initial rebalance delay
	// (QUEEN_KAFKA_GROUP_*).
	GroupMinSessionTimeout time.Duration
	GroupMaxSessionTimeout time.Duration
	GroupJoinDelay         time.Duration
	// ConsumerGroupSessionTimeout and ConsumerGroupHeartbeatInterval are
	// the session timeout of KIP-848 consumer-protocol members and the
	// heartbeat interval they are told
	// (QUEEN_KAFKA_CONSUMER_GROUP_SESSION_TIMEOUT_MS,
	// QUEEN_KAFKA_CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS; 0 for Kafka's
	// defaults).
	ConsumerGroupSessionTimeout    time.Duration
	ConsumerGroupHeartbeatInterval time.Duration

	// MaxMessageBytes bounds one produced record batch, Kafka's
	// message.max.bytes (QUEEN_KAFKA_MAX_MESSAGE_BYTES).
	MaxMessageBytes int
	// MaxDecompressedBytes bounds what the compressed record batches of one
	// produce request, all its partitions together, decompress to
	// (QUEEN_KAFKA_MAX_DECOMPRESSED_BYTES): a small compressed batch can
	// inflate a thousandfold, and decoded records are held until they are
	// committed.
	MaxDecompressedBytes int
	// FetchMaxBytes caps one fetch response whatever the client asks: a
	// response is held in memory until written (QUEEN_KAFKA_FETCH_MAX_BYTES).
	FetchMaxBytes int
	// TxnMaxTimeout is the longest transaction timeout a producer may ask
	// for (QUEEN_KAFKA_TXN_MAX_TIMEOUT_MS, Kafka's
	// transaction.max.timeout.ms).
	TxnMaxTimeout time.Duration
	// MaxTenantTxnTimeout is the longest a tenant's producer (tenancy
	// mode) may ask for, at most TxnMaxTimeout
	// (QUEEN_KAFKA_TENANT_TXN_MAX_TIMEOUT_MS): an open transaction holds
	// back HTTP pops of its partitions (tenant_caps.go).
	MaxTenantTxnTimeout time.Duration
	// LogDir is what DescribeLogDirs names as the one log directory.
	LogDir string
	// LogCleanerInterval is how often the leader of each raft group looks
	// at the Kafka topics it leads partitions of for retention.bytes and
	// compaction (QUEEN_KAFKA_LOG_CLEANER_INTERVAL_MS, Kafka's
	// log.cleaner.backoff.ms).
	LogCleanerInterval time.Duration
	// ACL is the node's authorizer (QUEEN_ACLS, acl.go): nil or disabled,
	// no ACL is checked and the ACL APIs answer SECURITY_DISABLED.
	ACL *acl.Authorizer
}

// Defaults for the zero values of Config.
const (
	DefaultMaxMessageBytes = 1048588
	DefaultFetchMaxBytes   = 32 << 20
	// DefaultMaxDecompressedBytes is the default decompression bound.
	DefaultMaxDecompressedBytes = records.DefaultMaxDecompressedBytes
	DefaultTxnMaxTimeout        = 15 * time.Minute
	DefaultMaxTenantTxnTimeout  = time.Minute
	DefaultDedupWindow          = 900 * time.Second
	DefaultLogCleanerInterval   = 15 * time.Second
)

func (c *Config) setDefaults() {
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 1
	}
	if c.MaxPartitions <= 0 {
		c.MaxPartitions = 1000000
	}
	if c.MaxPartitionsPerRequest <= 0 {
		c.MaxPartitionsPerRequest = DefaultMaxPartitionsPerRequest
	}
	if c.MaxTenantPartitions <= 0 {
		c.MaxTenantPartitions = DefaultMaxTenantPartitions
	}
	if c.MaxTenantGroups <= 0 {
		c.MaxTenantGroups = DefaultMaxTenantGroups
	}
	if c.MaxTenantTxnIDs <= 0 {
		c.MaxTenantTxnIDs = DefaultMaxTenantTxnIDs
	}
	if c.MetadataMaxPartitions <= 0 {
		c.MetadataMaxPartitions = DefaultMetadataMaxPartitions
	}
	if c.TenantMaxInflightBytes <= 0 {
		c.TenantMaxInflightBytes = DefaultTenantMaxInflightBytes
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxDecompressedBytes <= 0 {
		c.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if c.TxnMaxTimeout <= 0 {
		c.TxnMaxTimeout = DefaultTxnMaxTimeout
	}
	if c.MaxTenantTxnTimeout <= 0 {
		c.MaxTenantTxnTimeout = DefaultMaxTenantTxnTimeout
	}
	c.MaxTenantTxnTimeout = min(c.MaxTenantTxnTimeout, c.TxnMaxTimeout)
	if c.LogCleanerInterval <= 0 {
		c.LogCleanerInterval = DefaultLogCleanerInterval
	}
}

// Broker serves the engine-backed Kafka API keys on a kafka.Server.
type Broker struct {
	cfg    Config
	engine *raftgroups.Engine
	log    *slog.Logger
	srv    *kafka.Server
	ids    msgIDs
	parts  partitionCache
	groups *coordinators // consumer-group coordination (group_coordination.go)
	// shares is the share groups this node coordinates and shareSessions
	// the share sessions of consumers fetching from it (KIP-932).
	shares        *shareGroups
	shareSessions *shareSessions
	metrics       *brokerMetrics
	// quotas is this node's cache of the client quotas and their buckets
	// (client_quota_enforce.go).
	quotas *quotaCache

	// ctx ends with Close: the broker's own goroutines (node registration,
	// the transaction reaper) stop on it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// draining is set by Drain: Metadata leaves this node out.
	draining atomic.Bool
}

// New builds the broker and its listener; Start opens it.
func New(cfg Config, engine *raftgroups.Engine, log *slog.Logger) (*Broker, error) {
	cfg.setDefaults()
	if cfg.Listener.Logger == nil {
		cfg.Listener.Logger = log
	}
	// The SCRAM lookup asks the credentials AlterUserScramCredentials
	// manages before the static users (50_51_scram_credentials.go); it
	// holds b, filled in below.
	b := &Broker{}
	if cfg.Listener.Scram != nil {
		cfg.Listener.Scram = b.managedScram(cfg.Listener.Scram)
	}
	tenantShares(&cfg)
	srv, err := kafka.NewServer(cfg.Listener)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	*b = Broker{cfg: cfg, engine: engine, log: log, srv: srv, ctx: ctx, cancel: cancel, metrics: newBrokerMetrics(cfg.Metrics)}
	b.ids.init()
	b.groups = newCoordinators(engine, cfg, log)
	b.shares = newShareGroups(cfg.ConsumerGroupSessionTimeout, cfg.ConsumerGroupHeartbeatInterval)
	b.shareSessions = newShareSessions()
	b.quotas = newQuotaCache()
	for key, h := range b.handlers() {
		if _, listed := apiAccess[kmsg.Key(key)]; !listed {
			return nil, fmt.Errorf("kafka: %s has no row in the access table", kafka.KeyName(key))
		}
		if err := srv.RegisterHandler(key, b.metrics.measured(key, guard(key, b.aclGuarded(key, policed(key, b.quoted(key, h)))))); err != nil {
			return nil, fmt.Errorf("kafka: register %s: %w", kafka.KeyName(key), err)
		}
	}
	return b, nil
}

// handlers is every engine-backed API key this broker answers, by key.
func (b *Broker) handlers() map[int16]kafka.Handler {
	return map[int16]kafka.Handler{
		int16(kmsg.Produce):                      b.handleProduce,
		int16(kmsg.Fetch):                        b.handleFetch,
		int16(kmsg.ListOffsets):                  b.handleListOffsets,
		int16(kmsg.OffsetForLeaderEpoch):         b.handleOffsetForLeaderEpoch,
		int16(kmsg.Metadata):                     b.handleMetadata,
		int16(kmsg.CreateTopics):                 b.handleCreateTopics,
		int16(kmsg.DeleteTopics):                 b.handleDeleteTopics,
		int16(kmsg.DeleteRecords):                b.handleDeleteRecords,
		int16(kmsg.InitProducerID):               b.handleInitProducerID,
		int16(kmsg.AddPartitionsToTxn):           b.handleAddPartitionsToTxn,
		int16(kmsg.AddOffsetsToTxn):              b.handleAddOffsetsToTxn,
		int16(kmsg.EndTxn):                       b.handleEndTxn,
		int16(kmsg.TxnOffsetCommit):              b.handleTxnOffsetCommit,
		int16(kmsg.DescribeProducers):            b.handleDescribeProducers,
		int16(kmsg.DescribeTransactions):         b.handleDescribeTransactions,
		int16(kmsg.ListTransactions):             b.handleListTransactions,
		int16(kmsg.DescribeACLs):                 b.handleDescribeACLs,
		int16(kmsg.CreateACLs):                   b.handleCreateACLs,
		int16(kmsg.DeleteACLs):                   b.handleDeleteACLs,
		int16(kmsg.DescribeConfigs):              b.handleDescribeConfigs,
		int16(kmsg.AlterConfigs):                 b.handleAlterConfigs,
		int16(kmsg.DescribeLogDirs):              b.handleDescribeLogDirs,
		int16(kmsg.CreatePartitions):             b.handleCreatePartitions,
		int16(kmsg.IncrementalAlterConfigs):      b.handleIncrementalAlterConfigs,
		int16(kmsg.DescribeCluster):              b.handleDescribeCluster,
		int16(kmsg.ElectLeaders):                 b.handleElectLeaders,
		int16(kmsg.AlterPartitionAssignments):    b.handleAlterPartitionAssignments,
		int16(kmsg.ListPartitionReassignments):   b.handleListPartitionReassignments,
		int16(kmsg.DescribeUserSCRAMCredentials): b.handleDescribeUserScramCredentials,
		int16(kmsg.AlterUserSCRAMCredentials):    b.handleAlterUserScramCredentials,
		int16(kmsg.DescribeClientQuotas):         b.handleDescribeClientQuotas,
		int16(kmsg.AlterClientQuotas):            b.handleAlterClientQuotas,
		int16(kmsg.OffsetCommit):                 b.handleOffsetCommit,
		int16(kmsg.OffsetFetch):                  b.handleOffsetFetch,
		int16(kmsg.FindCoordinator):              b.handleFindCoordinator,
		int16(kmsg.JoinGroup):                    b.handleJoinGroup,
		int16(kmsg.Heartbeat):                    b.handleHeartbeat,
		int16(kmsg.LeaveGroup):                   b.handleLeaveGroup,
		int16(kmsg.SyncGroup):                    b.handleSyncGroup,
		int16(kmsg.DescribeGroups):               b.handleDescribeGroups,
		int16(kmsg.ListGroups):                   b.handleListGroups,
		int16(kmsg.DeleteGroups):                 b.handleDeleteGroups,
		int16(kmsg.OffsetDelete):                 b.handleOffsetDelete,
		int16(kmsg.ConsumerGroupHeartbeat):       b.handleConsumerGroupHeartbeat,
		int16(kmsg.ConsumerGroupDescribe):        b.handleConsumerGroupDescribe,
		int16(kmsg.ShareGroupHeartbeat):          b.handleShareGroupHeartbeat,
		int16(kmsg.ShareGroupDescribe):           b.handleShareGroupDescribe,
		int16(kmsg.ShareFetch):                   b.handleShareFetch,
		int16(kmsg.ShareAcknowledge):             b.handleShareAcknowledge,
		int16(kmsg.DescribeShareGroupOffsets):    b.handleDescribeShareGroupOffsets,
		int16(kmsg.DescribeTopicPartitions):      b.handleDescribeTopicPartitions,
		int16(kmsg.AlterShareGroupOffsets):       b.handleAlterShareGroupOffsets,
		int16(kmsg.DeleteShareGroupOffsets):      b.handleDeleteShareGroupOffsets,
	}
}

// Start listens for Kafka clients, registers this node's advertised address
// and starts the transaction timeout reaper and the log cleaner.
func (b *Broker) Start() error {
	if err := b.srv.Start(); err != nil {
		return err
	}
	b.wg.Add(4)
	go b.registerNode()
	go b.reapTxns()
	go b.cleanLogs()
	go b.refreshQuotas()
	return nil
}

// Addr is the address the listener is bound to.
func (b *Broker) Addr() string { return b.srv.Addr().String() }

// Drain is the Kafka half of a rolling restart, run once this node has
// handed its raft leaderships away: Metadata stops naming this node, so
// clients that ask again move to the others; the listener stops accepting;
// each connection closes once it has answered what it read (ctx bounds the
// wait). Close follows.
//
// The consumer-group coordinators stop first. A raft group the hand-off
// could not move is still led here, so its consumer groups are still
// coordinated here, but their members can no longer reach this node once
// the listener stops accepting: a coordinator left running would expire
// them one by one and record the rebalance, and the member that lost its
// partitions would see UNKNOWN_MEMBER_ID and its partitions' records
// again at another member. Stopped, it records nothing more; the next
// leader restores the memberships last recorded, with fresh sessions.
func (b *Broker) Drain(ctx context.Context) error {
	b.draining.Store(true)
	b.groups.close()
	return b.srv.Drain(ctx)
}

// Close stops the listener, closes every connection and waits for their
// handlers and the broker's own goroutines.
func (b *Broker) Close() error {
	b.groups.close() // parked joins answer NOT_COORDINATOR while their connections are open
	err := b.srv.Close()
	b.cancel()
	b.wg.Wait()
	return err
}
