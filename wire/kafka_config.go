package wire

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The Kafka topic configs queen accepts, with their defaults. Those
// TopicSettings reads change what queen does (docs/kafka.md says how);
// the others are kept and described so tools that set them work, but
// change nothing. The table is code, not data, so every replica validates
// and maps alike.
type topicConfigSpec struct {
	name  string
	def   string
	check func(string) bool
}

func isLong(min int64) func(string) bool {
	return func(s string) bool {
		v, err := strconv.ParseInt(s, 10, 64)
		return err == nil && v >= min
	}
}

func isInt(min int64) func(string) bool {
	return func(s string) bool {
		v, err := strconv.ParseInt(s, 10, 32)
		return err == nil && v >= min
	}
}

func isBool(s string) bool { return s == "true" || s == "false" }

func isRatio(s string) bool {
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && v >= 0 && v <= 1
}

func oneOf(values ...string) func(string) bool {
	return func(s string) bool { return slices.Contains(values, s) }
}

func isCleanupPolicy(s string) bool {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
			return false
		}
	}
	return true
}

func anyValue(string) bool { return true }

const maxLong = "9223372036854775807"

// kafkaTopicConfigs is sorted by name.
var kafkaTopicConfigs = []topicConfigSpec{
	{"cleanup.policy", "delete", isCleanupPolicy},
	{"compression.type", "producer", oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")},
	{"delete.retention.ms", "86400000", isLong(0)},
	{"file.delete.delay.ms", "60000", isLong(0)},
	{"flush.messages", maxLong, isLong(1)},
	{"flush.ms", maxLong, isLong(0)},
	{"follower.replication.throttled.replicas", "", anyValue},
	{"index.interval.bytes", "4096", isInt(0)},
	{"leader.replication.throttled.replicas", "", anyValue},
	{"local.retention.bytes", "-2", isLong(-2)},
	{"local.retention.ms", "-2", isLong(-2)},
	{"max.compaction.lag.ms", maxLong, isLong(1)},
	{"max.message.bytes", "1048588", isInt(0)},
	{"message.downconversion.enable", "true", isBool},
	{"message.timestamp.after.max.ms", maxLong, isLong(0)},
	{"message.timestamp.before.max.ms", maxLong, isLong(0)},
	{"message.timestamp.difference.max.ms", maxLong, isLong(0)},
	{"message.timestamp.type", "CreateTime", oneOf("CreateTime", "LogAppendTime")},
	{"min.cleanable.dirty.ratio", "0.5", isRatio},
	{"min.compaction.lag.ms", "0", isLong(0)},
	{"min.insync.replicas", "1", isInt(1)},
	{"preallocate", "false", isBool},
	{"remote.storage.enable", "false", isBool},
	{"retention.bytes", "-1", isLong(-1)},
	{"retention.ms", "-1", isLong(-1)},
	{"segment.bytes", "1073741824", isInt(14)},
	{"segment.index.bytes", "10485760", isInt(4)},
	{"segment.jitter.ms", "0", isLong(0)},
	{"segment.ms", "604800000", isLong(1)},
	{"unclean.leader.election.enable", "false", isBool},
}

func topicConfigSpecOf(name string) (topicConfigSpec, bool) {
	i, ok := slices.BinarySearchFunc(kafkaTopicConfigs, name, func(s topicConfigSpec, n string) int { return strings.Compare(s.name, n) })
	if !ok {
		return topicConfigSpec{}, false
	}
	return kafkaTopicConfigs[i], true
}

// Errors of CheckTopicConfig.
var (
	ErrUnknownConfig = fmt.Errorf("%w: unknown topic config", ErrBadRequest)
	ErrInvalidConfig = fmt.Errorf("%w: invalid topic config value", ErrBadRequest)
)

// CheckTopicConfig reports whether name is a topic config queen accepts and
// value a valid value for it.
func CheckTopicConfig(name, value string) error {
	spec, ok := topicConfigSpecOf(name)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrUnknownConfig, name)
	case !spec.check(value):
		return fmt.Errorf("%w: %s=%q", ErrInvalidConfig, name, value)
	}
	return nil
}

// TopicConfigDefaults lists every accepted topic config with its default, by
// name.
func TopicConfigDefaults() []ConfigEntry {
	out := make([]ConfigEntry, len(kafkaTopicConfigs))
	for i, s := range kafkaTopicConfigs {
		out[i] = ConfigEntry{Name: s.name, Value: s.def}
	}
	return out
}

// ApplyTopicConfigs sets the queue options the topic configs map onto:
// retention.ms becomes both retention options (Kafka deletes old records
// whether consumed or not), -1 turns retention off, and so does a
// cleanup.policy without delete (a compacted topic keeps its last record
// per key however old). Configs that fail CheckTopicConfig are ignored.
func ApplyTopicConfigs(cfg *QueueConfig, configs []ConfigEntry) {
	set := ParseTopicSettings(configs)
	ms := set.RetentionMs
	if !set.Delete {
		ms = -1
	}
	if ms < 0 {
		cfg.RetentionEnabled, cfg.RetentionSec, cfg.CompletedRetentionSec = false, 0, 0
		return
	}
	sec := uint32(min((ms+999)/1000, math.MaxUint32))
	cfg.RetentionEnabled, cfg.RetentionSec, cfg.CompletedRetentionSec = true, max(sec, 1), max(sec, 1)
}

// QueueTopicConfigs is what the topic configs of a queue created over HTTP
// read as: its retention options as retention.ms.
func QueueTopicConfigs(cfg *QueueConfig) []ConfigEntry {
	ms := int64(-1)
	if cfg.RetentionEnabled && cfg.RetentionSec > 0 {
		ms = int64(cfg.RetentionSec) * 1000
	}
	return []ConfigEntry{{Name: "retention.ms", Value: strconv.FormatInt(ms, 10)}}
}

// TopicSettings are the topic configs that change what queen does, parsed.
// Zero and negative values mean what Kafka's do (-1: unbounded).
type TopicSettings struct {
	// MaxMessageBytes bounds one produced batch; 0 when not set (the
	// broker's QUEEN_KAFKA_MAX_MESSAGE_BYTES applies).
	MaxMessageBytes int
	// LogAppendTime: the broker stamps records with their append time
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime bool
	// Delete and Compact are cleanup.policy's two words.
	Delete, Compact bool
	RetentionMs     int64
	RetentionBytes  int64
	// DeleteRetentionMs is how long a tombstone outlives its record
	// under compaction; MinCompactionLagMs how young a record stays
	// uncompacted.
	DeleteRetentionMs  int64
	MinCompactionLagMs int64
	// MinCleanableDirtyRatio is the share of a log written since its last
	// compaction that makes it due again.
	MinCleanableDirtyRatio float64
}

// Cleaned reports whether the topic's log needs the leader's cleaner:
// compaction, or a size bound on its retention.
func (t TopicSettings) Cleaned() bool { return t.Compact || (t.Delete && t.RetentionBytes >= 0) }

// ParseTopicSettings reads the settings from a topic's configs; what is not
// set (or fails CheckTopicConfig) takes its default.
func ParseTopicSettings(configs []ConfigEntry) TopicSettings {
	t := TopicSettings{Delete: true, RetentionMs: -1, RetentionBytes: -1, DeleteRetentionMs: 86400000, MinCleanableDirtyRatio: 0.5}
	for _, c := range configs {
		if CheckTopicConfig(c.Name, c.Value) != nil {
			continue
		}
		n, _ := strconv.ParseInt(c.Value, 10, 64) // checked above when numeric
		switch c.Name {
		case "max.message.bytes":
			t.MaxMessageBytes = int(n)
		case "message.timestamp.type":
			t.LogAppendTime = c.Value == "LogAppendTime"
		case "cleanup.policy":
			t.Delete, t.Compact = false, false
			for _, p := range strings.Split(c.Value, ",") {
				switch strings.TrimSpace(p) {
				case "delete":
					t.Delete = true
				case "compact":
					t.Compact = true
				}
			}
		case "retention.ms":
			t.RetentionMs = n
		case "retention.bytes":
			t.RetentionBytes = n
		case "delete.retention.ms":
			t.DeleteRetentionMs = n
		case "min.compaction.lag.ms":
			t.MinCompactionLagMs = n
		case "min.cleanable.dirty.ratio":
			t.MinCleanableDirtyRatio, _ = strconv.ParseFloat(c.Value, 64)
		}
	}
	return t
}
