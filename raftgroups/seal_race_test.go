package raftgroups

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/wire"
)

// A node whose replica has not applied the configure that turned
// encryption on decides not to seal; the state machine refuses its push
// for every replica (CodeSealRequired) and the engine seals and retries,
// so the record is stored sealed, never in clear.
func TestPushFromALaggingReplicaAfterConfigureIsSealed(t *testing.T) {
	var held atomic.Uint64 // the node whose apply waits for release
	release := make(chan struct{})
	c := newTestClusterWith(t, 3, 1, 0, func(cfg *Config) {
		id := cfg.NodeID
		cfg.BeforeApply = func(int) {
			if held.Load() == id {
				<-release
			}
		}
	})
	// Runs before the hosts close (cleanups are last in, first out).
	t.Cleanup(func() {
		held.Store(0)
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c.waitReady()
	k, err := envelope.ParseKey("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.engines {
		e.SetPayloadKey(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := c.leaderOf(0)
	if leader < 0 {
		t.Fatal("no leader")
	}
	lag := (leader + 1) % 3
	for _, q := range []string{"vault", "marker"} {
		if _, err := pushOne(ctx, c.engines[leader], q, q+"-0", `"first"`); err != nil {
			t.Fatal(err)
		}
	}
	// The lagging node has the queues, then stops applying.
	waitFor(t, ctx, func() bool {
		_, v := c.engines[lag].PartitionNamed(wire.DefaultTenant, "vault", "Default")
		_, m := c.engines[lag].PartitionNamed(wire.DefaultTenant, "marker", "Default")
		return v && m
	})
	held.Store(uint64(lag + 1))
	if _, err := c.engines[leader].Configure(ctx, &wire.ConfigureCmd{Tenant: wire.DefaultTenant, Queue: "vault",
		Set: wire.OptEncryptionEnabled, Config: wire.QueueConfig{EncryptionEnabled: true}}); err != nil {
		t.Fatal(err)
	}
	if c.engines[lag].QueueEncrypted(wire.DefaultTenant, "vault") {
		t.Fatal("the lagging node already sees the configure: the test races nothing")
	}
	// One entry carries the push to the encrypted queue and one to an
	// unencrypted marker queue, whose record shows on the leader when the
	// entry was applied there.
	mk := func(queue, txn string) wire.PushCmd {
		rec := wire.Record{Flags: wire.FlagJSON | wire.FlagTxnID, MsgID: wire.ID{0: 9, 1: byte(len(queue))}, TxnID: []byte(txn),
			Payload: []byte(`"SECRET-after-configure"`)}
		return wire.PushCmd{Tenant: wire.DefaultTenant, Queue: queue, Partition: "Default", PartitionIndex: -1,
			Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &rec)}
	}
	type answer struct {
		outs []PushOutcome
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		outs, err := c.engines[lag].Push(ctx, wire.DefaultTenant, []wire.PushCmd{mk("vault", "v-1"), mk("marker", "m-1")})
		done <- answer{outs, err}
	}()
	waitFor(t, ctx, func() bool {
		p, ok := c.engines[leader].PartitionNamed(wire.DefaultTenant, "marker", "Default")
		return ok && p.HighWatermark() == 2
	})
	held.Store(0)
	close(release)
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		t.Fatal("push did not finish")
	}
	if a.err != nil || a.outs[0].Err != nil || a.outs[0].Code != wire.CodeOK || a.outs[1].Code != wire.CodeOK {
		t.Fatalf("push: %v %+v", a.err, a.outs)
	}
	// The push is answered once the lagging node applied the sealed retry;
	// the leader applies the same entry on its own schedule.
	waitFor(t, ctx, func() bool {
		p, ok := c.engines[leader].PartitionNamed(wire.DefaultTenant, "vault", "Default")
		return ok && p.HighWatermark() == 2
	})
	p, _ := c.engines[leader].PartitionNamed(wire.DefaultTenant, "vault", "Default")
	var stored [][]byte // checked after the read: a test stopped inside it would leak its iterator
	err = p.Store().ReadRange(p, 1, 2, func(_ uint64, _ int64, body []byte) bool {
		stored = append(stored, append([]byte(nil), body...))
		return true
	})
	if err != nil || len(stored) != 1 {
		t.Fatalf("read: %v %d", err, len(stored))
	}
	rec, err := wire.ParseRecord(stored[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Flags&wire.FlagSealed == 0 {
		t.Fatalf("the record pushed after the configure is stored in clear: %s", rec.Payload)
	}
	c.engines[leader].OpenRecord(&rec)
	if string(rec.Payload) != `"SECRET-after-configure"` || string(rec.TxnID) != "v-1" {
		t.Fatalf("opened: %+v", rec)
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
