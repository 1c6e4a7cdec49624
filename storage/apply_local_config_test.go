package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// Apply reads nothing but the entry and the replicated state: two replicas
// whose own settings differ (trace retention, idle-partition cleanup age)
// apply one log, with ticks proposed by one leader, and end with the same
// keys (review finding 3 of issue 32: trace retention was read from the
// applying replica's config).
func TestReplicasWithDifferentLocalSettingsApplyALogAlike(t *testing.T) {
	a := newHarness(t)
	b := &harness{t: t, dir: t.TempDir(), now: a.now, local: func(c *Config) {
		c.TraceRetentionMs = 3_600_000 // an hour, against the default week
		c.PartitionCleanupMs = 1_000
	}}
	b.open()
	t.Cleanup(func() { b.s.Close() })
	b.raiseFormat()
	if a.s.cfg.TraceRetentionMs == b.s.cfg.TraceRetentionMs {
		t.Fatal("the replicas' settings do not differ")
	}
	both := func(kind wire.Kind, body []byte) {
		t.Helper()
		e := wire.AppendEntry(nil, a.now, []wire.Command{{Kind: kind, Body: body}})
		if ra, rb := a.applyEntry(e), b.applyEntry(e); fmt.Sprint(ra) != fmt.Sprint(rb) {
			t.Fatalf("kind %d answered %x and %x", kind, ra, rb)
		}
	}
	for i := range 20 {
		c := wire.TraceCmd{Tenant: wire.DefaultTenant, PartitionID: 1, TxnID: fmt.Sprintf("t-%d", i), EventType: "seen", Names: []string{"n"}}
		both(wire.KindTrace, c.Encode(nil))
		a.now += 10 * 60 * 1000 // ten minutes
		b.now = a.now
		// The leader (a) proposes its tick; both replicas apply it.
		both(wire.KindTick, a.s.TickCommand().Body)
	}
	// And a tick from a build that carried no retention.
	a.now += 2 * 3_600_000
	b.now = a.now
	both(wire.KindTick, nil)
	da, db := a.dump(), b.dump()
	if len(da) != len(db) {
		t.Fatalf("the replicas hold %d and %d keys", len(da), len(db))
	}
	for k, v := range da {
		if db[k] != v {
			t.Fatalf("key %q differs", k)
		}
	}
	if evs, _ := b.s.TracesOf(wire.DefaultTenant, 1, "t-0"); len(evs) != 1 {
		t.Fatalf("the replica with a shorter retention of its own dropped a trace the leader keeps: %+v", evs)
	}
}
