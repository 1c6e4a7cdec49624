// Package broker gives the Kafka API keys their meaning on top of the
// engine: a topic is a queue, Kafka partition i is the queue's partition
// with permanent index i, a produce is a push, a fetch is a read at an
// offset without a lease, a committed offset is the Queen consumer group's
// position (spec decisions 1–3, 8). One file per API key, named by key
// number, as franz-go's kfake does.
//
// It owns Kafka semantics: leadership answers (NOT_LEADER_OR_FOLLOWER,
// NOT_COORDINATOR), record batch decoding and re-encoding, group
// coordination state held in the leader's memory, producer and transaction
// bookkeeping. It never touches raft or the store directly: every write is
// an engine command and every read an engine read. The wire itself (frames,
// versions, SASL, TLS) is package kafka's.
package broker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
)

// Config is the Kafka facade's configuration, filled by cmd/queen from env
// (spec §3.6).
type Config struct {
	Listener kafka.Config
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
	// DedupWindow is how long idempotent-producer sequences are remembered
	// (QUEEN_KAFKA_DEDUP_WINDOW_SECONDS).
	DedupWindow time.Duration
	// Group session bounds and the initial rebalance delay
	// (QUEEN_KAFKA_GROUP_*).
	GroupMinSessionTimeout time.Duration
	GroupMaxSessionTimeout time.Duration
	GroupJoinDelay         time.Duration
}

// Broker serves the engine-backed Kafka API keys on a kafka.Server.
type Broker struct {
	cfg    Config
	engine *raftgroups.Engine
	log    *slog.Logger
	srv    *kafka.Server
	groups *coordinators // consumer-group coordination (group_coordination.go)
}

// New builds the broker and its listener; Start opens it.
func New(cfg Config, engine *raftgroups.Engine, log *slog.Logger) (*Broker, error) {
	if cfg.Listener.Logger == nil {
		cfg.Listener.Logger = log
	}
	srv, err := kafka.NewServer(cfg.Listener)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	b := &Broker{cfg: cfg, engine: engine, log: log, srv: srv, groups: newCoordinators(engine, cfg, log)}
	for key, h := range b.handlers() {
		if err := srv.RegisterHandler(key, h); err != nil {
			return nil, fmt.Errorf("kafka: register %s: %w", kafka.KeyName(key), err)
		}
	}
	return b, nil
}

// handlers is every engine-backed API key this broker answers, by key.
func (b *Broker) handlers() map[int16]kafka.Handler {
	return map[int16]kafka.Handler{
		int16(kmsg.OffsetCommit):    b.handleOffsetCommit,
		int16(kmsg.OffsetFetch):     b.handleOffsetFetch,
		int16(kmsg.FindCoordinator): b.handleFindCoordinator,
		int16(kmsg.JoinGroup):       b.handleJoinGroup,
		int16(kmsg.Heartbeat):       b.handleHeartbeat,
		int16(kmsg.LeaveGroup):      b.handleLeaveGroup,
		int16(kmsg.SyncGroup):       b.handleSyncGroup,
		int16(kmsg.DescribeGroups):  b.handleDescribeGroups,
		int16(kmsg.ListGroups):      b.handleListGroups,
		int16(kmsg.DeleteGroups):    b.handleDeleteGroups,
		int16(kmsg.OffsetDelete):    b.handleOffsetDelete,
	}
}

// Start listens for Kafka clients.
func (b *Broker) Start() error { return b.srv.Start() }

// Addr is the address the listener is bound to.
func (b *Broker) Addr() string { return b.srv.Addr().String() }

// Close stops the listener, closes every connection and waits for their
// handlers.
func (b *Broker) Close() error {
	b.groups.close() // parked joins answer NOT_COORDINATOR while their connections are open
	return b.srv.Close()
}
