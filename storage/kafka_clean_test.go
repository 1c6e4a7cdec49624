package storage

import (
	"fmt"
	"strings"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// offsetsAndValues reads p as a fetch does (ReadChunks) and lists each
// record as offset=value, and the chunk bases.
func offsetsAndValues(t *testing.T, s *Store, p Partition) (string, []uint64) {
	t.Helper()
	var out []string
	var bases []uint64
	if _, err := s.ReadChunks(p, 0, func(c *StoredChunk) bool {
		bases = append(bases, c.Base)
		recs, err := c.Records()
		if err != nil {
			t.Fatal(err)
		}
		it := wire.NewRecordIter(recs)
		for off := c.Base; ; off++ {
			body, _, ok := it.Next()
			if !ok {
				break
			}
			rec, err := wire.ParseRecord(body)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d=%s", off, rec.Payload))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ","), bases
}

func (h *harness) clean(c wire.LogCleanCmd) wire.CountResult {
	h.t.Helper()
	r, err := wire.DecodeCountResult(h.apply(wire.KindKafkaLogClean, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// A log-clean command drops exactly the offsets it lists: the records kept
// keep their offsets (the chunks holding them are split around the gaps),
// their append times and their transaction ids, across a reopen; then
// StartAt moves the log start over whole chunks.
func TestLogCleanDropsListedOffsets(t *testing.T) {
	h := newHarness(t)
	for i, n := range []int{4, 2, 4} { // chunks at 0, 4 and 6
		h.now += 1000
		if r := h.produce(h.produceCmd("c", 0, wire.NoProducer, 0, 0, n)); r.Code != wire.CodeOK {
			t.Fatalf("chunk %d: %+v", i, r)
		}
	}
	p, _ := h.s.PartitionByIndex(wire.DefaultTenant, "c", 0)
	if r := h.clean(wire.LogCleanCmd{Tenant: wire.ID{9}, PartitionID: p.ID, Drop: []wire.OffsetRange{{From: 1, To: 2}}}); r.Code != wire.CodePartitionNotFound {
		t.Fatalf("another tenant's partition: %+v", r)
	}
	r := h.clean(wire.LogCleanCmd{Tenant: wire.DefaultTenant, PartitionID: p.ID, Drop: []wire.OffsetRange{{From: 1, To: 3}, {From: 5, To: 8}, {From: 40, To: 50}}})
	if r.Code != wire.CodeOK || r.N != 5 {
		t.Fatalf("%+v", r)
	}
	want := "0=v0,3=v3,4=v0,8=v2,9=v3"
	for _, reopen := range []bool{false, true} {
		if reopen {
			h.s.Close()
			h.open()
			p, _ = h.s.PartitionByIndex(wire.DefaultTenant, "c", 0)
		}
		got, bases := offsetsAndValues(t, h.s, p)
		if got != want || fmt.Sprint(bases) != "[0 3 4 8]" {
			t.Fatalf("reopened %v: %s in chunks %v, want %s", reopen, got, bases, want)
		}
	}
	if p.HighWatermark() != 10 || p.LogStart() != 0 {
		t.Fatalf("offsets moved: hwm %d start %d", p.HighWatermark(), p.LogStart())
	}
	// Each record kept its chunk's append time: the third chunk's are the
	// latest, and a lookup landing in a gap finds the next record kept.
	if off, at, ok, err := h.s.OffsetForTime(p, h.now); err != nil || !ok || off != 8 || at != h.now {
		t.Fatalf("by time: %d %d %v %v", off, at, ok, err)
	}
	if off, _, ok, _ := h.s.OffsetForTime(p, h.now-1500); !ok || off != 4 {
		t.Fatalf("by time into the second chunk: %d %v", off, ok)
	}
	// StartAt drops the chunks wholly below it and moves the log start.
	r = h.clean(wire.LogCleanCmd{Tenant: wire.DefaultTenant, PartitionID: p.ID, StartAt: 4})
	if r.Code != wire.CodeOK || r.N != 4 || p.LogStart() != 4 {
		t.Fatalf("%+v start %d", r, p.LogStart())
	}
	if got, _ := offsetsAndValues(t, h.s, p); got != "4=v0,8=v2,9=v3" {
		t.Fatalf("after the log start moved: %s", got)
	}
}

// A topic's settings are parsed from its configs when they are set and
// when the store opens, and CleanedTopics lists the topics whose configs
// ask for the log cleaner.
func TestTopicSettingsAcrossReopen(t *testing.T) {
	h := newHarness(t)
	for name, configs := range map[string][]wire.ConfigEntry{"kept": nil,
		"compacted": {{Name: "cleanup.policy", Value: "compact"}, {Name: "max.message.bytes", Value: "6291456"}}} {
		create := wire.CreateTopicCmd{Tenant: wire.DefaultTenant, Name: name, Partitions: 2, ReqID: wire.ID{byte(len(name))}, Place: testPlace, Configs: configs}
		if c := h.code(wire.KindKafkaCreateTopic, create.Encode(nil)); c != wire.CodeOK {
			t.Fatal(c)
		}
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			h.s.Close()
			h.open()
		}
		set, ok := h.s.TopicSettings(wire.DefaultTenant, "compacted")
		if !ok || !set.Compact || set.Delete || set.MaxMessageBytes != 6291456 {
			t.Fatalf("reopened %v: %+v", reopen, set)
		}
		cleaned := h.s.CleanedTopics()
		if len(cleaned) != 1 || cleaned[0].Name != "compacted" || cleaned[0].Partitions != 2 {
			t.Fatalf("reopened %v: cleaned topics %+v", reopen, cleaned)
		}
	}
	cfg := wire.TopicConfigCmd{Tenant: wire.DefaultTenant, Name: "kept", Ops: []wire.ConfigOp{{Op: wire.ConfigSet, Name: "retention.bytes", Value: "10"}}}
	if c := h.code(wire.KindKafkaTopicConfig, cfg.Encode(nil)); c != wire.CodeOK {
		t.Fatal(c)
	}
	if set, _ := h.s.TopicSettings(wire.DefaultTenant, "kept"); set.RetentionBytes != 10 || len(h.s.CleanedTopics()) != 2 {
		t.Fatalf("after a config change: %+v", set)
	}
}
