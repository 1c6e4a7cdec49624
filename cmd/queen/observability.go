package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/VictoriaMetrics/metrics"
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
