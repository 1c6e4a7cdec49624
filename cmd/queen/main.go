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
	"syscall"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/crypto/secret"
	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/kafka/broker"
	"github.com/queen-mq/queen/raftgroups"
)

const version = "0.1.0"

func main() { os.Exit(run()) }

func run() int {
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "queen: bad configuration: %v\n", err)
		return 2
	}
	log := newLogger(cfg)
	slog.SetDefault(log)
	cfg.Raft.Logger = log
	logConfig(log, &cfg)
	verifier, err := authn.New(context.Background(), cfg.Auth, log, &http.Client{Timeout: cfg.Auth.JWKSTimeout})
	if err != nil {
		log.Error("boot: broker JWT", "err", err)
		return 2
	}
	defer verifier.Close()
	log.Info("config: auth", "jwt", verifier.Describe(), "tenancy_header", cfg.HTTP.TenancyHeader)
	cfg.HTTP.Auth = verifier

	if cfg.PprofAddr != "" {
		stopPprof := servePprof(log, cfg.PprofAddr)
		defer stopPprof()
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
	srv := api.New(cfg.HTTP, engine, log)
	if err := srv.Start(); err != nil {
		host.Close()
		log.Error("boot: http listener", "err", err)
		return 1
	}
	if cfg.Kafka.SASL == "plain" {
		// Decision 9: with broker JWT on, the SASL password is a token and
		// its roles limit the connection; otherwise the static user table.
		if verifier.Enabled() {
			cfg.Kafka.Broker.Listener.Authenticate = broker.BrokerJWTs(verifier, cfg.HTTP.TenancyHeader)
		} else {
			cfg.Kafka.Broker.Listener.Authenticate = broker.StaticUsers(cfg.Kafka.SASLUsers, cfg.HTTP.TenancyHeader)
		}
	}
	kb, err := broker.New(cfg.Kafka.Broker, engine, log)
	if err == nil {
		err = kb.Start()
	}
	if err != nil {
		_ = srv.Shutdown(context.Background())
		host.Close()
		log.Error("boot: kafka listener", "err", err)
		return 1
	}
	log.Info("boot: serving", "http", srv.Addr(), "kafka", kb.Addr(), "raft", cfg.Raft.ListenAddr,
		"groups", cfg.Raft.Groups, "node", cfg.Raft.NodeID, "version", version)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	<-ctx.Done()
	stop()
	log.Info("shutdown: signal received, draining")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: http drain incomplete", "err", err)
	}
	if err := kb.Close(); err != nil {
		log.Warn("shutdown: kafka listener", "err", err)
	}
	host.Close()
	log.Info("shutdown: complete")
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func newLogger(cfg Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogJSON {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// logConfig states each mode the node runs in, one `config: <area>` line
// per area, secrets masked.
func logConfig(log *slog.Logger, cfg *Config) {
	log.Info("config: server", "addr", cfg.HTTP.Addr, "server_id", cfg.ServerID,
		"max_body_bytes", cfg.HTTP.MaxBodyBytes, "stmt_timeout", cfg.HTTP.RequestTimeout)
	mode := "single"
	if len(cfg.Raft.Peers) > 1 {
		mode = "cluster"
	}
	log.Info("config: storage", "dir", cfg.Raft.Dir, "mode", mode, "node_id", cfg.Raft.NodeID,
		"peers", len(cfg.Raft.Peers), "groups", cfg.Raft.Groups, "raft_listen", cfg.Raft.ListenAddr,
		"raft_token", secret.Mask(cfg.Raft.Token), "rtt_ms", cfg.Raft.RTTMillisecond,
		"election_ms", cfg.Raft.ElectionRTT*cfg.Raft.RTTMillisecond, "tenant_groups", cfg.TenantGroups != "",
		"disk_high_pct", cfg.Raft.DiskHighPct, "disk_low_pct", cfg.Raft.DiskLowPct,
		"entry_max_bytes", cfg.Raft.MaxEntryBytes)
	logNodeTLS(log, cfg.Raft.TLS)
	log.Info("config: logging", "level", cfg.LogLevel.String(), "json", cfg.LogJSON)
	log.Info("config: clock", "max_skew_ms", cfg.Raft.MaxClockSkew.Milliseconds(), "test_offset_ms", cfg.Raft.ClockTestOffset.Milliseconds())
	if cfg.Raft.ClockTestOffset != 0 {
		log.Warn("config: QUEEN_TEST_CLOCK_OFFSET_MS is set: this node reads its wall clock that far off (a test setting)",
			"offset_ms", cfg.Raft.ClockTestOffset.Milliseconds())
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
		"sasl", orNone(k.SASL), "sasl_users", len(k.SASLUsers), "tls", k.TLSCert != "",
		"max_connections", k.Broker.Listener.MaxConnections, "max_connections_per_ip", k.Broker.Listener.MaxConnectionsPerIP,
		"max_unauthenticated_connections", k.Broker.Listener.MaxUnauthenticatedConnections,
		"login_timeout", k.Broker.Listener.LoginTimeout, "default_partitions", k.Broker.DefaultPartitions,
		"max_message_bytes", k.Broker.MaxMessageBytes, "max_decompressed_bytes", k.Broker.MaxDecompressedBytes,
		"fetch_max_bytes", k.Broker.FetchMaxBytes)
	if k.SASL != "" && k.TLSCert == "" {
		log.Warn("config: SASL/PLAIN on a plaintext Kafka listener sends passwords in clear; set QUEEN_KAFKA_TLS_CERT and QUEEN_KAFKA_TLS_KEY")
	}
	if cfg.Raft.Token == "" && !loopbackOnly(cfg.Raft.ListenAddr) {
		log.Warn("config: the raft listener is reachable beyond loopback and QUEEN_RAFT_TOKEN is unset: "+
			"anyone who reaches it can vote, append and install snapshots; set QUEEN_RAFT_TOKEN on every node",
			"raft_listen", cfg.Raft.ListenAddr)
	}
}
