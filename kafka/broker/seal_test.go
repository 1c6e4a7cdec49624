package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// A topic configured with encryptionEnabled seals each produced record
// whole: key, header names and values and value are in none of the node's
// files, and a consumer reads them back intact, with the records produced
// before encryption was turned on (stored in clear, still read).
func TestEncryptedTopicSealsKeysAndHeaders(t *testing.T) {
	h, e, dir := raftgroupstest.StartKeyed(t)
	n := serveBroker(t, h, e, func(c *Config) { c.DefaultPartitions = 1 })
	const topic = "vault"
	prod := n.client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	before := &kgo.Record{Key: []byte("CLEARKEY-9d2e"), Value: []byte("CLEARVAL-9d2e")}
	if err := prod.ProduceSync(ctxFor(t), before).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Configure(ctxFor(t), &wire.ConfigureCmd{Tenant: wire.DefaultTenant, Queue: topic,
		Set: wire.OptEncryptionEnabled, Config: wire.QueueConfig{EncryptionEnabled: true}}); err != nil {
		t.Fatal(err)
	}
	sealed := []*kgo.Record{
		{Key: []byte("KEY-MARK-9d2e"), Value: []byte("VALUE-MARK-9d2e"),
			Headers: []kgo.RecordHeader{{Key: "HNAME-MARK-9d2e", Value: []byte("HVAL-MARK-9d2e")}}},
		{Key: []byte("TOMBKEY-MARK-9d2e")}, // a tombstone: null value
	}
	if err := prod.ProduceSync(ctxFor(t), sealed...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consume(t, cons, 3)
	same := func(a, b *kgo.Record) bool {
		if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || (a.Value == nil) != (b.Value == nil) || len(a.Headers) != len(b.Headers) {
			return false
		}
		for i := range a.Headers {
			if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
				return false
			}
		}
		return true
	}
	for i, want := range []*kgo.Record{before, sealed[0], sealed[1]} {
		if !same(got[i], want) {
			t.Fatalf("record %d: got key %q value %q headers %v, want key %q value %q headers %v",
				i, got[i].Key, got[i].Value, got[i].Headers, want.Key, want.Value, want.Headers)
		}
	}
	// Closed, every store has flushed what it holds.
	h.Close()
	for _, m := range []string{"KEY-MARK", "VALUE-MARK", "HNAME-MARK", "HVAL-MARK", "TOMBKEY-MARK"} {
		if hits := raftgroupstest.FilesContaining(t, dir, []byte(m)); len(hits) != 0 {
			t.Errorf("%s in clear on disk: %v", m, hits)
		}
	}
	if hits := raftgroupstest.FilesContaining(t, dir, []byte("CLEARKEY-9d2e")); len(hits) == 0 {
		t.Error("the record produced before encryption is not found: the scan proves nothing")
	}
}
