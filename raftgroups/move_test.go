package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// waitFormat waits until every group of e is at format v.
func waitFormat(ctx context.Context, t *testing.T, e *Engine, v uint32) {
	t.Helper()
	for {
		low := false
		for n := range e.host.groups {
			if e.ActiveFormat(n) < v {
				low = true
			}
		}
		if !low {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("groups not at format %d: %v", v, e.host.Format().Active)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitMove polls a move's record until it ends.
func waitMove(ctx context.Context, t *testing.T, e *Engine, queue string, index uint32) wire.MoveInfo {
	t.Helper()
	for {
		if m, ok := e.MoveOf(wire.DefaultTenant, queue, index); ok && !moveActive(&m) {
			return m
		}
		select {
		case <-ctx.Done():
			m, _ := e.MoveOf(wire.DefaultTenant, queue, index)
			t.Fatalf("move not ended: %+v", m)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A partition moves to another group while a writer pushes to it: every
// acknowledged push is in the moved partition once, in order, at the
// offset its push answered, the directory names the new group, and writes
// and pops go on there.
func TestMovePartitionWhileItTakesWrites(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	waitFormat(ctx, t, e, wire.FormatV9)
	out := pushTo(ctx, t, e, "mv", "a", `"first"`)
	from := wire.GroupOfID(out[0].PartitionID)
	to := (from + 1) % 3

	var mu sync.Mutex
	acked := map[uint64]string{} // offset → payload
	acked[out[0].BaseOffset] = `"first"`
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf(`"m%d"`, i)
			id := wire.ID{0: 7, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}
			res, err := e.Push(ctx, wire.DefaultTenant, []wire.PushCmd{{Tenant: wire.DefaultTenant, Queue: "mv", Partition: "a",
				PartitionIndex: -1, Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: id, Payload: []byte(p)})}})
			if err == nil && res[0].Err == nil && res[0].Code == wire.CodeOK {
				mu.Lock()
				acked[res[0].BaseOffset] = p
				mu.Unlock()
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // let writes run before the move starts; not a synchronisation
	if _, err := e.StartMove(ctx, wire.DefaultTenant, "mv", 0, from); err == nil {
		t.Fatal("a move to the group already holding the partition was accepted")
	}
	if _, err := e.StartMove(ctx, wire.DefaultTenant, "mv", 0, to); err != nil {
		t.Fatal(err)
	}
	m := waitMove(ctx, t, e, "mv", 0)
	close(stop)
	wg.Wait()
	if m.State != wire.MoveDone {
		t.Fatalf("move: %+v", m)
	}
	d, _ := e.DirByIndex(wire.DefaultTenant, "mv", 0)
	if int(d.Group) != to {
		t.Fatalf("directory names group %d, want %d", d.Group, to)
	}
	p, ok := e.PartitionNamed(wire.DefaultTenant, "mv", "a")
	if !ok || wire.GroupOfID(p.ID) != to {
		t.Fatalf("partition %+v %v", p, ok)
	}
	got := map[uint64]string{}
	err := e.GroupStore(to).ReadRange(p, 0, p.HighWatermark(), func(off uint64, _ int64, body []byte) bool {
		r, err := wire.ParseRecord(body)
		if err != nil {
			t.Fatal(err)
		}
		got[off] = string(r.Payload)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(got)) != p.HighWatermark() {
		t.Fatalf("%d records below the high-water mark %d", len(got), p.HighWatermark())
	}
	for off, want := range acked {
		if got[off] != want {
			t.Fatalf("offset %d holds %q, its push was answered for %q", off, got[off], want)
		}
	}
	t.Logf("moved with %d acknowledged pushes, %d records", len(acked), len(got))
	hwm := p.HighWatermark()
	after := pushTo(ctx, t, e, "mv", "a", `"after"`)
	if wire.GroupOfID(after[0].PartitionID) != to || after[0].BaseOffset != hwm {
		t.Fatalf("a push after the move: %+v", after[0])
	}
	res, err := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "mv", Group: "g", Batch: 10000, SubMode: wire.SubAll,
		LeaseIDs: []wire.ID{{0: 3, 15: 1}}})
	if err != nil || len(res.Claims) == 0 || res.Claims[0].From != 0 {
		t.Fatalf("pop after the move: %v %+v", err, res.Claims)
	}
	if src, ok := e.GroupStore(from).PartitionByIndex(wire.DefaultTenant, "mv", 0); ok {
		t.Fatalf("the source still holds %+v", src)
	}

	// And back: the old source takes it again (its moved mark goes).
	if _, err := e.StartMove(ctx, wire.DefaultTenant, "mv", 0, from); err != nil {
		t.Fatal(err)
	}
	for {
		if m, ok := e.MoveOf(wire.DefaultTenant, "mv", 0); ok && m.To == uint16(from) && !moveActive(&m) {
			if m.State != wire.MoveDone {
				t.Fatalf("move back: %+v", m)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the move back never ended")
		case <-time.After(20 * time.Millisecond):
		}
	}
	back := pushTo(ctx, t, e, "mv", "a", `"back"`)
	if wire.GroupOfID(back[0].PartitionID) != from || back[0].BaseOffset != hwm+1 {
		t.Fatalf("a push after the move back: %+v", back[0])
	}
}

// A move asked to cancel while it copies leaves the partition where it
// was, and the target holds nothing of it.
func TestMoveCancelledWhileCopying(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	waitFormat(ctx, t, e, wire.FormatV9)
	out := pushTo(ctx, t, e, "mc", "a", `1`, `2`)
	from := wire.GroupOfID(out[0].PartitionID)
	to := (from + 1) % 3
	home := e.Home(wire.DefaultTenant, "mc")
	cat, _ := e.Catalog(wire.DefaultTenant, "mc")
	// Recorded already cancelled, so the mover meets the cancel first.
	for _, op := range []uint8{wire.MoveOpStart, wire.MoveOpCancel} {
		cmd := wire.MoveRecordCmd{Op: op, Inc: cat.Inc, Move: wire.MoveInfo{Tenant: wire.DefaultTenant, Queue: "mc", Index: 0, To: uint16(to)}}
		if _, err := e.Propose(ctx, home, wire.Command{Kind: wire.KindMoveRecord, Body: cmd.Encode(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	m := waitMove(ctx, t, e, "mc", 0)
	if m.State != wire.MoveFailed || m.Reason != "cancelled" {
		t.Fatalf("move: %+v", m)
	}
	if d, _ := e.DirByIndex(wire.DefaultTenant, "mc", 0); int(d.Group) != from {
		t.Fatalf("directory moved to %d", d.Group)
	}
	if _, _, ok := e.GroupStore(to).Incoming(wire.DefaultTenant, "mc", 0); ok {
		t.Fatal("the target kept an incoming partition")
	}
	pushTo(ctx, t, e, "mc", "a", `3`)
}

// A push to a partition sealed for a move answers CodePartitionMoved (the
// front doors' retriable partition_moving / NOT_LEADER_OR_FOLLOWER), after
// resolving it again from the home; unsealed, it is written again.
func TestPushToASealedPartitionIsRetriable(t *testing.T) {
	e, ctx := oneNodeThreeGroups(t)
	waitFormat(ctx, t, e, wire.FormatV9)
	out := pushTo(ctx, t, e, "ms", "a", `1`)
	from := wire.GroupOfID(out[0].PartitionID)
	cat, _ := e.Catalog(wire.DefaultTenant, "ms")
	seal := func(unseal bool) {
		t.Helper()
		c := wire.MoveSealCmd{Tenant: wire.DefaultTenant, Queue: "ms", Inc: cat.Inc, Index: 0, Unseal: unseal}
		res, err := proposeOne(ctx, e, from, wire.KindMoveSeal, c.Encode(nil), wire.DecodeMoveSealResult)
		if err != nil || res.Code != wire.CodeOK {
			t.Fatalf("seal %v: %+v %v", unseal, res, err)
		}
	}
	seal(false)
	res, err := e.Push(ctx, wire.DefaultTenant, []wire.PushCmd{{Tenant: wire.DefaultTenant, Queue: "ms", Partition: "a",
		PartitionIndex: -1, Flags: wire.PushIndexTxn, Count: 1, Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{0: 5, 15: 1}, Payload: []byte(`2`)})}})
	if err != nil || res[0].Err != nil || res[0].Code != wire.CodePartitionMoved || !errors.Is(res[0].Code.Err(), wire.ErrPartitionMoving) {
		t.Fatalf("a push to the sealed partition: %v %+v", err, res)
	}
	seal(true)
	if again := pushTo(ctx, t, e, "ms", "a", `3`); again[0].BaseOffset != 1 {
		t.Fatalf("a push after the unseal: %+v", again[0])
	}
}
