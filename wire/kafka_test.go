package wire

import (
	"errors"
	"reflect"
	"testing"
)

// kafkaSamples is one valid body of every Kafka command kind.
func kafkaSamples() []Command {
	rec := AppendRecord(nil, &Record{Flags: FlagKey | FlagHeaders | FlagTimestamp, MsgID: ID{1},
		Key: []byte("k"), Headers: []Header{{"h", []byte("v")}}, Timestamp: 7, Payload: []byte("v")})
	prod := KafkaProduceCmd{ProducerID: 5, Epoch: 1, BaseSeq: 10, StateTTLMs: 900000,
		Push: PushCmd{Tenant: DefaultTenant, Queue: "t", PartitionIndex: 0, Inc: 77,
			Count: 1, Records: rec}}
	init := InitProducerCmd{Tenant: DefaultTenant, Transactional: true, TxnID: "tx", TimeoutMs: 60000, ReqID: ID{2}}
	create := CreateTopicCmd{Tenant: DefaultTenant, Name: "t", Partitions: 3, Configs: []ConfigEntry{{"retention.ms", "1000"}}, ReqID: ID{3}}
	parts := CreatePartitionsCmd{Tenant: DefaultTenant, Name: "t", Count: 4}
	del := DeleteTopicCmd{Tenant: DefaultTenant, Name: "t"}
	cfg := TopicConfigCmd{Tenant: DefaultTenant, Name: "t", Replace: true, Ops: []ConfigOp{{ConfigSet, "retention.ms", "5"}, {ConfigDelete, "segment.ms", ""}}}
	begin := TxnBeginCmd{Tenant: DefaultTenant, TxnID: "tx", ProducerID: 5, Epoch: 2}
	end := TxnEndCmd{Tenant: DefaultTenant, TxnID: "tx", ProducerID: 5, Epoch: 2, TxnSeq: 3, Commit: true, BumpEpoch: true}
	stage := KafkaStageCmd{XID: ID{7}, Coord: 2, DeadlineMs: 99, TxnID: "tx", Produce: prod,
		Offsets: []TxnOffset{{Group: "g", Queue: "t", PartitionIndex: 0, Offset: 9, Metadata: "m"}}}
	reg := RegisterNodeCmd{NodeID: 2, KafkaAddr: "127.0.0.1:9092"}
	clean := LogCleanCmd{Tenant: DefaultTenant, PartitionID: 9, StartAt: 4, Drop: []OffsetRange{{5, 7}, {9, 10}}}
	settled := TxnSettledCmd{Tenant: DefaultTenant, TxnID: "tx", XID: ID{8}}
	return []Command{
		{Kind: KindKafkaTxnSettled, Body: settled.Encode(nil)},
		{Kind: KindKafkaProduce, Body: prod.Encode(nil)}, {Kind: KindKafkaInitProducer, Body: init.Encode(nil)},
		{Kind: KindKafkaCreateTopic, Body: create.Encode(nil)}, {Kind: KindKafkaCreatePartitions, Body: parts.Encode(nil)},
		{Kind: KindKafkaDeleteTopic, Body: del.Encode(nil)}, {Kind: KindKafkaTopicConfig, Body: cfg.Encode(nil)},
		{Kind: KindKafkaTxnBegin, Body: begin.Encode(nil)}, {Kind: KindKafkaTxnEnd, Body: end.Encode(nil)}, {Kind: KindKafkaStage, Body: stage.Encode(nil)},
		{Kind: KindKafkaRegisterNode, Body: reg.Encode(nil)}, {Kind: KindKafkaLogClean, Body: clean.Encode(nil)},
	}
}

// decodeKafka runs the decoder of a Kafka command kind and re-encodes what
// it decoded.
func decodeKafka(c Command) ([]byte, error) {
	switch c.Kind {
	case KindKafkaProduce:
		v, err := DecodeKafkaProduceCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaInitProducer:
		v, err := DecodeInitProducerCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaCreateTopic:
		v, err := DecodeCreateTopicCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaCreatePartitions:
		v, err := DecodeCreatePartitionsCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaDeleteTopic:
		v, err := DecodeDeleteTopicCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaTopicConfig:
		v, err := DecodeTopicConfigCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaTxnBegin:
		v, err := DecodeTxnBeginCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaTxnEnd:
		v, err := DecodeTxnEndCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaRegisterNode:
		v, err := DecodeRegisterNodeCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaStage:
		v, err := DecodeKafkaStageCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaLogClean:
		v, err := DecodeLogCleanCmd(c.Body)
		return v.Encode(nil), err
	case KindKafkaTxnSettled:
		v, err := DecodeTxnSettledCmd(c.Body)
		return v.Encode(nil), err
	}
	return nil, errors.New("not a Kafka kind")
}

func TestKafkaCommandsRoundTrip(t *testing.T) {
	for _, c := range kafkaSamples() {
		again, err := decodeKafka(c)
		if err != nil {
			t.Fatalf("kind %d: %v", c.Kind, err)
		}
		if !reflect.DeepEqual(again, c.Body) {
			t.Fatalf("kind %d re-encodes differently:\n%x\n%x", c.Kind, c.Body, again)
		}
		if c.Kind == KindKafkaProduce || c.Kind == KindKafkaStage {
			continue // its records are opaque here: applying checks their framing
		}
		// Every strict prefix of a body is refused, never half-read.
		for n := 0; n < len(c.Body); n++ {
			if _, err := decodeKafka(Command{Kind: c.Kind, Body: c.Body[:n]}); err == nil {
				t.Fatalf("kind %d: %d-byte prefix decoded", c.Kind, n)
			}
		}
	}
}

func TestKafkaResultsRoundTrip(t *testing.T) {
	p := KafkaProduceResult{Code: CodeDuplicate, QueueCreated: true, BaseOffset: 12, LogStart: 3}
	if got, err := DecodeKafkaProduceResult(p.Encode(nil)); err != nil || got != p {
		t.Fatalf("%v %+v", err, got)
	}
	i := InitProducerResult{Code: CodeOK, ProducerID: 77, Epoch: 3}
	if got, err := DecodeInitProducerResult(i.Encode(nil)); err != nil || got != i {
		t.Fatalf("%v %+v", err, got)
	}
	x := KafkaTxnResult{Code: CodeFenced, TxnSeq: 4, Epoch: 9}
	if got, err := DecodeKafkaTxnResult(x.Encode(nil)); err != nil || got != x {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestTopicConfigs(t *testing.T) {
	if err := CheckTopicConfig("retention.ms", "60000"); err != nil {
		t.Fatal(err)
	}
	if err := CheckTopicConfig("retention.ms", "-2"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	if err := CheckTopicConfig("no.such", "1"); !errors.Is(err, ErrUnknownConfig) {
		t.Fatal(err)
	}
	cfg := DefaultQueueConfig()
	ApplyTopicConfigs(&cfg, []ConfigEntry{{"retention.ms", "1500"}})
	if !cfg.RetentionEnabled || cfg.RetentionSec != 2 || cfg.CompletedRetentionSec != 2 {
		t.Fatalf("%+v", cfg)
	}
	if got := QueueTopicConfigs(&cfg); got[0].Value != "2000" {
		t.Fatalf("%+v", got)
	}
	ApplyTopicConfigs(&cfg, nil)
	if cfg.RetentionEnabled || cfg.RetentionSec != 0 {
		t.Fatalf("%+v", cfg)
	}
	for i := 1; i < len(kafkaTopicConfigs); i++ {
		if kafkaTopicConfigs[i-1].name >= kafkaTopicConfigs[i].name {
			t.Fatalf("config table not sorted at %s", kafkaTopicConfigs[i].name)
		}
	}
	for _, d := range TopicConfigDefaults() {
		if err := CheckTopicConfig(d.Name, d.Value); err != nil {
			t.Fatalf("default of %s: %v", d.Name, err)
		}
	}
}

func TestNextSeqWraps(t *testing.T) {
	if NextSeq(1<<31-1, 1) != 0 || NextSeq(5, 3) != 8 {
		t.Fatal("sequence arithmetic")
	}
}

// FuzzKafkaCommands feeds arbitrary bodies to every Kafka command decoder:
// they fail or decode, never panic, and what decodes re-encodes to a body
// that decodes the same.
func FuzzKafkaCommands(f *testing.F) {
	for _, c := range kafkaSamples() {
		f.Add(uint8(c.Kind), c.Body)
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		c := Command{Kind: Kind(30 + kind%9), Body: body}
		again, err := decodeKafka(c)
		if err != nil {
			return
		}
		third, err := decodeKafka(Command{Kind: c.Kind, Body: again})
		if err != nil || !reflect.DeepEqual(again, third) {
			t.Fatalf("kind %d: re-encoding is not stable: %v", c.Kind, err)
		}
	})
}

// AppendRecord's length prefix is the body's length, for every optional
// field and timestamps of every varint width.
func TestAppendRecordLengthPrefix(t *testing.T) {
	for _, ts := range []int64{0, 1, -1, 63, -64, 64, 1 << 40, -1 << 62} {
		r := &Record{Flags: FlagTxnID | FlagKey | FlagHeaders | FlagTimestamp | FlagTrace | FlagSub, MsgID: ID{1},
			TxnID: []byte("t"), Key: []byte{}, Headers: []Header{{"a", nil}, {"b", make([]byte, 200)}},
			Timestamp: ts, TraceID: []byte("tr"), ProducerSub: []byte("s"), Payload: make([]byte, 300)}
		it := NewRecordIter(AppendRecord([]byte{9}, r)[1:])
		body, _, ok := it.Next()
		if !ok || it.Err() != nil || it.r.Len() != 0 {
			t.Fatalf("ts %d: prefix does not match the body", ts)
		}
		if got, err := ParseRecord(body); err != nil || got.Timestamp != ts || len(got.Payload) != 300 {
			t.Fatalf("ts %d: %v %+v", ts, err, got)
		}
	}
}

// A log-clean command's ranges must be sorted, disjoint and not empty.
func TestLogCleanRanges(t *testing.T) {
	for _, drop := range [][]OffsetRange{{{5, 5}}, {{5, 8}, {7, 9}}, {{9, 10}, {1, 2}}} {
		c := LogCleanCmd{Drop: drop}
		if _, err := DecodeLogCleanCmd(c.Encode(nil)); err == nil {
			t.Fatalf("ranges %v decoded", drop)
		}
	}
}

func TestParseTopicSettings(t *testing.T) {
	def := ParseTopicSettings(nil)
	if !def.Delete || def.Compact || def.RetentionMs != -1 || def.RetentionBytes != -1 || def.MaxMessageBytes != 0 || def.Cleaned() {
		t.Fatalf("defaults %+v", def)
	}
	set := ParseTopicSettings([]ConfigEntry{{"cleanup.policy", "compact, delete"}, {"max.message.bytes", "6291456"},
		{"message.timestamp.type", "LogAppendTime"}, {"retention.bytes", "100"}, {"delete.retention.ms", "5"},
		{"min.compaction.lag.ms", "7"}, {"max.message.bytes", "bad"}})
	want := TopicSettings{MaxMessageBytes: 6291456, LogAppendTime: true, Delete: true, Compact: true, RetentionMs: -1,
		RetentionBytes: 100, DeleteRetentionMs: 5, MinCompactionLagMs: 7, MinCleanableDirtyRatio: 0.5}
	if set != want || !set.Cleaned() {
		t.Fatalf("got %+v", set)
	}
	// A compacted topic without delete keeps its records however old.
	cfg := DefaultQueueConfig()
	ApplyTopicConfigs(&cfg, []ConfigEntry{{"retention.ms", "1000"}, {"cleanup.policy", "compact"}})
	if cfg.RetentionEnabled {
		t.Fatalf("retention on a compact-only topic: %+v", cfg)
	}
	ApplyTopicConfigs(&cfg, []ConfigEntry{{"retention.ms", "1000"}, {"cleanup.policy", "compact,delete"}})
	if !cfg.RetentionEnabled || cfg.RetentionSec != 1 {
		t.Fatalf("retention of a compact,delete topic: %+v", cfg)
	}
}
