package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queen-mq/queen/raftgroups"
)

// How the node reports on itself: its log (LOG_LEVEL, LOG_FORMAT) and the
// one metrics set every package adds its series to.

// logFormat reads LOG_FORMAT (json or text), with QUEEN_LOG_JSON kept as
// the older spelling of json. Both set and disagreeing is refused rather
// than one silently winning.
func (e *env) logFormat() (json bool) {
	legacy := e.bool("QUEEN_LOG_JSON", false)
	switch v := strings.ToLower(strings.TrimSpace(e.lookup("LOG_FORMAT"))); v {
	case "":
		return legacy
	case "json", "text":
		if strings.TrimSpace(e.lookup("QUEEN_LOG_JSON")) != "" && legacy != (v == "json") {
			e.fail("LOG_FORMAT", "is %q but QUEEN_LOG_JSON says %v; set one of them", v, legacy)
		}
		return v == "json"
	default:
		e.fail("LOG_FORMAT", "must be json or text, got %q", e.lookup("LOG_FORMAT"))
		return legacy
	}
}

func logFormatName(json bool) string {
	if json {
		return "json"
	}
	return "text"
}

// dragonboatLevel is the least level of dragonboat's own lines that are
// logged: WARN unless the node logs at debug, so a healthy node's log is
// queen's own lines (raftgroups/logger.go maps dragonboat's levels).
func dragonboatLevel(ours slog.Level) slog.Level {
	if ours <= slog.LevelDebug {
		return ours
	}
	return max(slog.LevelWarn, ours)
}

func newLogger(cfg Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogJSON {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// setupMetrics gives the HTTP API, the raft groups and the Kafka facade one
// metrics set, the one /metrics/prometheus writes, and makes the library
// write HELP and TYPE lines, which Prometheus' parsers and Grafana expect
// (docs/metrics.md). The metadata switch is process-wide, hence here.
func setupMetrics(cfg *Config) {
	metrics.ExposeMetadata(true)
	set := metrics.NewSet()
	cfg.HTTP.Metrics, cfg.Raft.Metrics, cfg.Kafka.Broker.Metrics = set, set, set
}

// applyMemoryLimit gives the Go runtime its share of the node's memory
// budget as a soft limit (raftgroups.GoMemoryLimit: the stores' caches and
// memtables live outside the Go heap): the collector then runs as often as
// the budget needs rather than letting the heap grow to twice what is
// live, which, with millions of partitions, is most of a node's memory. It
// is a target, not a cap that refuses work: when more is live than the
// limit, the runtime bounds the collector's CPU and the node keeps serving
// (docs/operations.md).
func applyMemoryLimit(log *slog.Logger, cfg *Config) {
	cache, memtable := raftgroups.StoreMemory(cfg.MemoryLimit, cfg.Raft.Groups)
	switch {
	case cfg.MemoryLimitFromGo:
		log.Info("config: memory", "budget_mb", cfg.MemoryLimit>>20, "source", "GOMEMLIMIT", "go_limit_mb", cfg.MemoryLimit>>20,
			"group_cache_mb", cache>>20, "group_memtable_mb", memtable>>20)
	case cfg.MemoryLimit > 0:
		goLimit := raftgroups.GoMemoryLimit(cfg.MemoryLimit, cfg.Raft.Groups)
		debug.SetMemoryLimit(goLimit)
		log.Info("config: memory", "budget_mb", cfg.MemoryLimit>>20, "source", "QUEEN_MEMORY_LIMIT_MB", "go_limit_mb", goLimit>>20,
			"group_cache_mb", cache>>20, "group_memtable_mb", memtable>>20)
	default:
		log.Info("config: memory", "budget_mb", "none", "group_cache_mb", cache>>20, "group_memtable_mb", memtable>>20)
	}
}
