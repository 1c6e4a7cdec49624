// Command queen runs one queen node: the raft groups holding the data, the
// native HTTP API on PORT and (later) the Kafka listener, all from settings
// read once from the environment.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/crypto/secret"
	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/kafka/broker"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy/proxy"
	"github.com/queen-mq/queen/wire"
)

const version = "0.1.0"

// main runs the command line (cli_root.go); with no command it serves.
func main() { os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr)) }

// run serves as a broker node until SIGTERM or SIGINT and returns the exit
// code.
func run() int {
	cfg, err := loadProcessConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "queen: bad configuration: %v\n", err)
		return 2
	}
	setupMetrics(&cfg)
	log := newLogger(cfg)
	slog.SetDefault(log)
	cfg.Raft.Logger = log
	logConfig(log, &cfg)
	applyMemoryLimit(log, &cfg)
	verifier, err := authn.New(context.Background(), cfg.Auth, log, &http.Client{Timeout: cfg.Auth.JWKSTimeout})
	if err != nil {
		log.Error("boot: broker JWT", "err", err)
		return 2
	}
	defer verifier.Close()
	log.Info("config: auth", "jwt", verifier.Describe(), "tenancy_header", cfg.HTTP.TenancyHeader)
	cfg.HTTP.Auth = verifier
	// Before anything starts: it needs only the config and the verifier.
	if err := setKafkaAuth(&cfg.Kafka, verifier, cfg.HTTP.TenancyHeader); err != nil {
		log.Error("boot: kafka SASL", "err", err)
		return 1
	}

	if cfg.PprofAddr != "" {
		stopPprof := servePprof(log, cfg.PprofAddr, cfg.PprofToken)
		defer stopPprof()
	}
	if err := standbyGroups(log, &cfg, cfg.StandbyGroupsSet); err != nil {
		log.Error("boot: " + err.Error())
		return 1
	}
	host, err := raftgroups.Start(cfg.Raft)
	if err != nil {
		log.Error("boot: raft groups did not start", "err", err)
		return 1
	}
	engine, err := raftgroups.NewEngine(host, cfg.Placement)
	if err != nil {
		host.Close()
		log.Error("boot: engine", "err", err)
		return 1
	}
	if cfg.EncryptionKey.Valid() {
		engine.SetPayloadKey(cfg.EncryptionKey)
		log.Info("encryption service initialized (AES-256-GCM)")
	}
	// Ephemeral queues follow the membership, not only QUEEN_RAFT_PEERS.
	cfg.HTTP.Ephemeral.PeersFunc = func() []uint64 {
		var out []uint64
		for _, p := range host.Peers() {
			out = append(out, p.ID)
		}
		return out
	}
	// One authorizer for both doors: the same bindings, refreshed once
	// (config_acls.go, docs/acls.md).
	logACLs(log, cfg.ACLs)
	authz := newAuthorizer(cfg.ACLs, engine.ACLStore(), log)
	authz.Start()
	defer authz.Close()
	cfg.Kafka.Broker.ACL = authz
	cfg.HTTP.ACL = authz // the HTTP door's (http/api/acl.go)
	brokerAddr := cfg.HTTP.Addr
	logProxy(log, &cfg.Proxy, brokerAddr)
	if cfg.Proxy.Embedded && !cfg.Proxy.OwnPort {
		cfg.HTTP.Addr = "" // the proxy fronts PORT and calls the broker in-process
	}
	srv := api.New(cfg.HTTP, engine, log)
	var px *proxy.Proxy
	if cfg.Proxy.Embedded {
		px = proxy.New(cfg.Proxy.Proxy, engine, srv.Handler(), log)
		if cfg.Kafka.SASLPlain {
			l := &cfg.Kafka.Broker.Listener
			l.Authenticate = px.KafkaPlain(l.Authenticate)
		}
	}
	if err := srv.Start(); err != nil {
		host.Close()
		log.Error("boot: http listener", "err", err)
		return 1
	}
	if px != nil {
		if err := px.Start(); err != nil {
			_ = srv.Shutdown(context.Background())
			host.Close()
			log.Error("boot: proxy listener", "err", err)
			return 1
		}
	}
	kb, err := broker.New(cfg.Kafka.Broker, engine, log)
	if err == nil {
		err = kb.Start()
	}
	if err != nil {
		if px != nil {
			_ = px.Shutdown(context.Background())
		}
		_ = srv.Shutdown(context.Background())
		host.Close()
		log.Error("boot: kafka listener", "err", err)
		return 1
	}
	log.Info("boot: serving", "http", brokerAddr, "kafka", kb.Addr(), "raft", cfg.Raft.ListenAddr,
		"groups", cfg.Raft.Groups, "node", cfg.Raft.NodeID, "version", version)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	<-ctx.Done()
	stop()
	log.Info("shutdown: signal received, draining")
	drain(log, cfg.ShutdownGrace, host, kb, srv, px)
	authz.Close() // its refresher reads the raft groups: stopped before them
	host.Close()
	log.Info("shutdown: complete")
	return 0
}

// drain stops a node the way a Kafka broker's controlled shutdown does,
// so a rolling restart shows clients nothing their retries do not absorb
// (docs/operations.md, "Rolling restart / upgrade"): first every raft
// group's leadership moves to a peer (requests here now hear
// NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR and clients look again), then
// Kafka Metadata stops naming this node and its connections close as each
// finishes what it was asked, then HTTP stops accepting and completes the
// requests in flight, which still reach the new leaders through this
// node's raft replicas. grace bounds the whole; half of it at most goes to
// the hand-off, so draining always gets time.
func drain(log *slog.Logger, grace time.Duration, host *raftgroups.Host, kb *broker.Broker, srv *api.Server, px *proxy.Proxy) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if led := host.HandOff(grace / 2); len(led) > 0 {
		log.Warn("shutdown: some raft groups still led here; they elect a new leader after this node stops", "groups", led)
	}
	log.Info("shutdown: leadership handed off", "ms", time.Since(start).Milliseconds())
	// A peer whose preferred group this node leads moves it back while the
	// node still answers; clients would follow it here. Keep handing such
	// groups away until the node stops serving.
	stopHanding := make(chan struct{})
	var handing sync.WaitGroup
	handing.Add(1)
	go func() {
		defer handing.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopHanding:
				return
			case <-t.C:
				host.HandOff(time.Second)
			}
		}
	}()
	defer func() { close(stopHanding); handing.Wait() }()
	// Kafka gets three quarters of what is left, so HTTP always has time
	// to complete its requests in flight.
	kctx, kcancel := context.WithTimeout(ctx, time.Until(start.Add(grace))*3/4)
	defer kcancel()
	if err := kb.Drain(kctx); err != nil {
		log.Warn("shutdown: kafka drain", "err", err)
	}
	log.Info("shutdown: kafka connections drained", "ms", time.Since(start).Milliseconds())
	// The proxy drains beside the broker: its requests run in srv, whose
	// shutdown wakes the long polls parked there.
	proxyDone := make(chan struct{})
	go func() {
		defer close(proxyDone)
		if px != nil {
			if err := px.Shutdown(ctx); err != nil {
				log.Warn("shutdown: proxy drain incomplete", "err", err)
			}
		}
	}()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown: http drain incomplete", "err", err)
	}
	<-proxyDone
	if err := kb.Close(); err != nil {
		log.Warn("shutdown: kafka listener", "err", err)
	}
	log.Info("shutdown: requests drained", "ms", time.Since(start).Milliseconds())
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// logConfig states each mode the node runs in, one `config: <area>` line
// per area, secrets masked.
func logConfig(log *slog.Logger, cfg *Config) {
	log.Info("config: server", "addr", cfg.HTTP.Addr, "server_id", cfg.ServerID,
		"max_body_bytes", cfg.HTTP.MaxBodyBytes, "max_buffered_bytes", cfg.HTTP.MaxBufferedBytes,
		"max_connections", cfg.HTTP.MaxConnections, "max_conns_per_ip", cfg.HTTP.MaxConnsPerIP,
		"max_push_items", cfg.HTTP.MaxPushItems, "tenant_max_inflight_push_items", cfg.HTTP.TenantMaxInflightPushItems,
		"stmt_timeout", cfg.HTTP.RequestTimeout)
	mode := "single"
	if len(cfg.Raft.Peers) > 1 || cfg.Raft.Join {
		mode = "cluster"
	}
	log.Info("config: storage", "dir", cfg.Raft.Dir, "mode", mode, "node_id", cfg.Raft.NodeID,
		"peers", len(cfg.Raft.Peers), "groups", cfg.Raft.Groups, "raft_listen", cfg.Raft.ListenAddr,
		"raft_token", secret.Mask(cfg.Raft.Token), "raft_tokens_also_accepted", len(cfg.Raft.AcceptTokens), "rtt_ms", cfg.Raft.RTTMillisecond,
		"election_ms", cfg.Raft.ElectionRTT*cfg.Raft.RTTMillisecond, "tenant_groups", cfg.TenantGroups != "",
		"disk_high_pct", cfg.Raft.DiskHighPct, "disk_low_pct", cfg.Raft.DiskLowPct,
		"entry_max_bytes", cfg.Raft.MaxEntryBytes)
	inFlight := cfg.Raft.MaxInFlightBytes
	if inFlight == 0 {
		inFlight = raftgroups.InFlightBytes(cfg.Raft.MemoryBudget, cfg.Raft.Groups)
	}
	log.Info("config: group_commit", "entry_gather_bytes", cfg.Raft.MaxBatchBytes, "inflight_bytes_per_group", inFlight,
		"inflight_from_budget", cfg.Raft.MaxInFlightBytes == 0)
	newest := wire.NewestFormat
	if cfg.Raft.NewestFormat != 0 {
		newest = cfg.Raft.NewestFormat
		log.Warn("config: QUEEN_TEST_NEWEST_FORMAT is set: this node applies raft formats only up to it, as an older build (a test setting)", "newest", newest)
	}
	log.Info("config: format", "newest", newest, "oldest", wire.OldestFormat, "auto_raise", !cfg.Raft.HoldFormat)
	log.Info("config: partition_cache", "partitions_per_group", cfg.Raft.PartitionCache, "bounded", cfg.Raft.PartitionCache > 0)
	if cfg.Raft.PartitionCleanup > 0 {
		log.Info("config: partition_cleanup", "enabled", true, "idle_days", cfg.Raft.PartitionCleanup.Hours()/24)
	} else {
		log.Info("config: partition_cleanup", "enabled", false)
	}
	logNodeTLS(log, cfg.Raft.TLS)
	logLink(log, cfg.Raft)
	ec := &cfg.HTTP.Ephemeral
	log.Info("config: ephemeral", "max_bytes", ec.Store.MaxBytes, "queue_max_bytes", ec.Store.Defaults.MaxBytes,
		"queue_max_length", ec.Store.Defaults.MaxLength, "lease_s", int(ec.Store.Defaults.Lease/time.Second),
		"retry_limit", ec.Store.Defaults.RetryLimit, "implicit_idle_s", int(ec.Store.ImplicitIdle/time.Second),
		"member_ttl_ms", ec.MemberTTL.Milliseconds(), "rate", ec.Rate, "burst", ec.Burst, "require_grant", ec.RequireGrant)
	log.Info("config: membership", "join", cfg.Raft.Join, "promote_max_lag", cfg.HTTP.PromoteMaxLag,
		"force_recover", cfg.Raft.ForceRecover)
	if cfg.Raft.ForceRecover {
		log.Error("config: QUEEN_RAFT_FORCE_RECOVER is set: every raft group is rebuilt as a one-voter cluster of this node " +
			"from its own data; the other members are dropped for good. Use only when a majority is lost for good.")
	}
	log.Info("config: logging", "level", cfg.LogLevel.String(), "format", logFormatName(cfg.LogJSON),
		"dragonboat_level", cfg.Raft.DragonboatLogLevel.String())
	log.Info("config: clock", "max_skew_ms", cfg.Raft.MaxClockSkew.Milliseconds(), "test_offset_ms", cfg.Raft.ClockTestOffset.Milliseconds())
	if cfg.Raft.ClockTestOffset != 0 {
		log.Warn("config: QUEEN_TEST_CLOCK_OFFSET_MS is set: this node reads its wall clock that far off (a test setting)",
			"offset_ms", cfg.Raft.ClockTestOffset.Milliseconds())
	}
	if cfg.Raft.ApplyTestDelay != 0 {
		log.Warn("config: QUEEN_TEST_APPLY_DELAY_MS is set: this node applies every batch of raft entries that much later (a test setting)",
			"delay_ms", cfg.Raft.ApplyTestDelay.Milliseconds())
	}
	if cfg.Raft.CrashAt != "" {
		log.Warn("config: QUEEN_FAULT_CRASH_AT is set: this node kills itself at that fault point (a test setting)", "point", cfg.Raft.CrashAt)
	}
	switch {
	case !cfg.EncryptionKeySet:
		log.Info("config: security", "encryption_key", secret.Unset)
	case cfg.EncryptionKeyErr != nil:
		log.Info("config: security", "encryption_key", "<invalid>")
		log.Warn(envelope.DisabledWarning, "err", cfg.EncryptionKeyErr)
	default:
		log.Info("config: security", "encryption_key", "<set>", "cipher", "AES-256-GCM")
	}
	k := &cfg.Kafka
	log.Info("config: kafka_facade", "addr", k.Broker.Listener.Addr, "advertised", k.Broker.AdvertisedAddr,
		"sasl", orNone(k.SASL), "sasl_users", len(k.SASLUsers), "allow_anonymous", k.AllowAnonymous, "tls", k.TLSCert != "",
		"max_connections", k.Broker.Listener.MaxConnections, "max_connections_per_ip", k.Broker.Listener.MaxConnectionsPerIP,
		"max_unauthenticated_connections", k.Broker.Listener.MaxUnauthenticatedConnections,
		"login_timeout", k.Broker.Listener.LoginTimeout, "default_partitions", k.Broker.DefaultPartitions,
		"max_partitions", k.Broker.MaxPartitions, "max_partitions_per_request", k.Broker.MaxPartitionsPerRequest,
		"max_tenant_partitions", k.Broker.MaxTenantPartitions, "metadata_max_partitions", k.Broker.MetadataMaxPartitions,
		"max_message_bytes", k.Broker.MaxMessageBytes, "max_decompressed_bytes", k.Broker.MaxDecompressedBytes,
		"fetch_max_bytes", k.Broker.FetchMaxBytes)
	if k.SASL == "" && cfg.Auth.Enabled {
		log.Warn("config: QUEEN_KAFKA_ALLOW_ANONYMOUS=true: the Kafka port accepts unauthenticated clients "+
			"(produce, fetch, DeleteTopics) while JWT_ENABLED=true protects HTTP", "addr", k.Broker.Listener.Addr)
	}
	if (k.SASLPlain || k.SASLBearer) && k.TLSCert == "" {
		log.Warn("config: SASL/PLAIN or OAUTHBEARER on a plaintext Kafka listener sends passwords and tokens in clear; set QUEEN_KAFKA_TLS_CERT and QUEEN_KAFKA_TLS_KEY")
	}
	switch {
	case cfg.Raft.Token == "" && !loopbackOnly(cfg.Raft.ListenAddr) && cfg.Auth.Enabled && cfg.RaftAllowAnonymous:
		log.Warn("config: QUEEN_RAFT_ALLOW_ANONYMOUS=true: the raft listener is reachable beyond loopback without QUEEN_RAFT_TOKEN "+
			"(votes, appends, snapshots, membership and ephemeral node calls) while JWT_ENABLED=true protects HTTP",
			"raft_listen", cfg.Raft.ListenAddr)
	case cfg.Raft.Token == "" && !loopbackOnly(cfg.Raft.ListenAddr):
		log.Warn("config: the raft listener is reachable beyond loopback and QUEEN_RAFT_TOKEN is unset: "+
			"anyone who reaches it can vote, append and install snapshots; set QUEEN_RAFT_TOKEN on every node",
			"raft_listen", cfg.Raft.ListenAddr)
	}
}
