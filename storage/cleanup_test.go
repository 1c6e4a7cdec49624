package storage

import (
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

const testCleanupMs = 3600_000 // an hour: the tests' PARTITION_CLEANUP_DAYS

// cleanTick applies a tick carrying the leader's cleanup age.
func (h *harness) cleanTick(ms int64) {
	h.t.Helper()
	c := wire.TickCmd{PartitionCleanupMs: ms}
	h.applyEntry(wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindTick, Body: c.Encode(nil)}}))
}

// pushAt pushes one record to partition index of a queue's incarnation inc,
// as the engine does once it has resolved the name.
func (h *harness) pushAt(queue, name string, index uint32, inc uint64) wire.PushResult {
	h.t.Helper()
	c := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: queue, Partition: name, PartitionIndex: int32(index), Inc: inc,
		Count: 1, Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: h.nextID(), Payload: []byte(`1`)})}
	r, err := wire.DecodePushResult(h.apply(wire.KindPush, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// retainCompleted turns on queue's completed retention of sec seconds.
func (h *harness) retainCompleted(queue string, sec uint32) {
	h.t.Helper()
	cfg := wire.DefaultQueueConfig()
	cfg.RetentionEnabled, cfg.CompletedRetentionSec = true, sec
	h.configure(queue, wire.OptRetentionEnabled|wire.OptCompletedRetentionSeconds, cfg)
}

// consumeAll pops up to n messages of queue in the queue-mode group and
// acknowledges them all, which makes them retention's to drop.
func (h *harness) consumeAll(queue string, n uint32) {
	h.t.Helper()
	cl := h.pop(queue, wire.QueueModeGroup, n, 600000).Claims[0]
	_, txns := h.payloads(cl)
	for _, id := range txns {
		h.ack(wire.QueueModeGroup, cl, id, wire.AckCompleted)
	}
}

// placedIn is the directory entries of an allocation placed in group g.
func placedIn(r wire.AllocResult, g uint16) []wire.DirEntry {
	var out []wire.DirEntry
	for _, d := range r.Parts {
		if d.Group == g {
			out = append(out, d)
		}
	}
	return out
}

func (h *harness) dropDir(kind wire.Kind, c wire.DropDirCmd) wire.Code {
	h.t.Helper()
	code, _ := wire.ResultCode(h.apply(kind, c.Encode(nil)))
	return code
}

// A partition whose messages retention dropped, untouched for the cleanup
// age, goes with its cursors and its directory entry; one still holding a
// message stays. Its name comes back as a new partition at a new index,
// offsets from 0, and a push through the old index is refused, also after
// a restart.
func TestIdleEmptyPartitionsAreRemovedAndComeBackNew(t *testing.T) {
	h := newHarness(t)
	h.retainCompleted("r", 60)
	h.push("r", "old", "1", "2")
	h.consumeAll("r", 2)
	h.push("r", "busy", "3")
	old, _ := h.s.PartitionByName(wire.DefaultTenant, "r", "old")
	inc := h.alloc("r").Catalog.Inc

	h.now += 120_000
	h.tick() // retention: "old" is empty now, "busy" still holds its message
	if old.LogStart() != 2 || old.HighWatermark() != 2 {
		t.Fatalf("retention left %d..%d", old.LogStart(), old.HighWatermark())
	}
	h.cleanTick(testCleanupMs) // idle for 2 minutes only
	if _, ok := h.s.PartitionByName(wire.DefaultTenant, "r", "old"); !ok {
		t.Fatal("a partition idle for less than the cleanup age was removed")
	}
	h.now += testCleanupMs
	h.cleanTick(0) // a leader with cleanup off removes nothing
	if _, ok := h.s.PartitionByName(wire.DefaultTenant, "r", "old"); !ok {
		t.Fatal("a tick without a cleanup age removed a partition")
	}
	h.cleanTick(testCleanupMs)
	if _, ok := h.s.PartitionByName(wire.DefaultTenant, "r", "old"); ok {
		t.Fatal("the idle empty partition is still there")
	}
	if _, ok := h.s.PartitionByName(wire.DefaultTenant, "r", "busy"); !ok {
		t.Fatal("a partition holding a message was removed")
	}
	if _, ok := h.s.DirByName(wire.DefaultTenant, "r", "old"); ok {
		t.Fatal("the home kept the directory entry of its own removed partition")
	}
	if h.has(partitionKey(old.ID)) || h.has(cursorKey(old.ID, wire.QueueModeGroup)) || h.has(dirKey(h.s.queue(wire.DefaultTenant, "r").id, old.Index)) {
		t.Fatal("keys of the removed partition kept")
	}
	if d := h.s.PendingDrops(wire.DefaultTenant, "r"); len(d) != 0 {
		t.Fatalf("the home has drops to tell itself: %v", d)
	}
	qv := h.s.Queues(wire.DefaultTenant, QueueFilter{Name: "r"}, h.now)[0]
	if qv.Partitions != nil || qv.QueueInfo.Partitions != 1 || qv.Totals.Partitions != 1 || qv.Totals.Total != 1 {
		t.Fatalf("queue after the removal: info %d partitions, totals %+v", qv.QueueInfo.Partitions, qv.Totals)
	}

	// A push through the old index is refused as gone; the name is
	// allocated again at a new index.
	if r := h.pushAt("r", "old", old.Index, inc); r.Code != wire.CodePartitionGone || r.PartitionIndex != old.Index {
		t.Fatalf("push through a stale directory entry: %v, index %d", r.Code, r.PartitionIndex)
	}
	r := h.push("r", "old", "4")
	if r.Code != wire.CodeOK || r.PartitionIndex == old.Index || r.PartitionID == old.ID || r.BaseOffset != 0 {
		t.Fatalf("the name pushed again: %+v (old index %d)", r, old.Index)
	}

	h.s.Close()
	h.open()
	if r := h.pushAt("r", "old", old.Index, inc); r.Code != wire.CodePartitionGone {
		t.Fatalf("after a restart, push through the stale entry: %v", r.Code)
	}
	if d, ok := h.s.DirByName(wire.DefaultTenant, "r", "old"); !ok || d.Index == old.Index {
		t.Fatalf("after a restart the directory has %+v %v", d, ok)
	}
	if dir := h.s.Dir(wire.DefaultTenant, "r", 0, 10); len(dir) != 2 {
		t.Fatalf("directory after a restart: %+v", dir)
	}
}

// In a group that is not the queue's home, a removed partition's index is
// refused for ever (a push and an EnsureShardCmd from a stale directory
// alike) and waits to be dropped at the home, by the reconciler's DropDir
// or by an allocation naming it gone.
func TestShardRemovesFirstAndTheHomeDropsAfter(t *testing.T) {
	home, other := newGroupHarness(t, 0), newGroupHarness(t, 1)
	r := home.allocIn(twoGroups, "q", "a", "b", "c", "d")
	theirs := placedIn(r, 1) // b at 1, d at 3
	ensure := wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: theirs}
	if code := other.ensure(ensure); code != wire.CodeOK {
		t.Fatal(code)
	}
	other.now += testCleanupMs + 1
	other.cleanTick(testCleanupMs)
	for _, d := range theirs {
		if _, ok := other.s.PartitionByIndex(wire.DefaultTenant, "q", d.Index); ok {
			t.Fatalf("never-pushed partition %q kept", d.Name)
		}
	}
	if got := other.s.PendingDrops(wire.DefaultTenant, "q"); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("pending drops %v", got)
	}
	if code := other.ensure(ensure); code != wire.CodeOK {
		t.Fatal(code)
	}
	if _, ok := other.s.PartitionByIndex(wire.DefaultTenant, "q", 1); ok {
		t.Fatal("a stale EnsureShardCmd made a removed partition again")
	}
	if pr := other.pushAt("q", "b", 1, r.Catalog.Inc); pr.Code != wire.CodePartitionGone {
		t.Fatalf("push to a removed index: %v", pr.Code)
	}

	// The reconciler's way: the home drops b's entry (a DropDir naming the
	// wrong group drops nothing), then the shard forgets it.
	drop := wire.DropDirCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: r.Catalog.Inc, Group: 0, Indexes: []uint32{1}}
	if code := home.dropDir(wire.KindDropDir, drop); code != wire.CodeOK {
		t.Fatal(code)
	}
	if _, ok := home.s.DirByName(wire.DefaultTenant, "q", "b"); !ok {
		t.Fatal("a DropDir from the wrong group dropped an entry")
	}
	drop.Group = 1
	if code := home.dropDir(wire.KindDropDir, drop); code != wire.CodeOK {
		t.Fatal(code)
	}
	if _, ok := home.s.DirByName(wire.DefaultTenant, "q", "b"); ok {
		t.Fatal("the home kept b's entry")
	}
	if n := home.s.DirInGroup(wire.DefaultTenant, "q", 1); n != 1 {
		t.Fatalf("the home counts %d partitions in group 1", n)
	}
	if code := other.dropDir(wire.KindForgetDrops, drop); code != wire.CodeOK {
		t.Fatal(code)
	}
	if got := other.s.PendingDrops(wire.DefaultTenant, "q"); len(got) != 1 || got[0] != 3 {
		t.Fatalf("pending drops after forgetting b: %v", got)
	}
	stale := wire.DropDirCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: r.Catalog.Inc + 1, Group: 1, Indexes: []uint32{3}}
	if code := home.dropDir(wire.KindDropDir, stale); code != wire.CodeQueueNotFound {
		t.Fatalf("DropDir of another incarnation: %v", code)
	}

	// The engine's way: a push refused as gone allocates the name again,
	// naming the index.
	c := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: "q", Flags: wire.AllocCreate, Place: twoGroups, Names: []string{"d"}, Gone: []uint32{3}}
	again, err := wire.DecodeAllocResult(home.apply(wire.KindAlloc, c.Encode(nil)))
	if err != nil || again.Code != wire.CodeOK || again.Parts[0].Index != 4 {
		t.Fatalf("d allocated again: %v %+v", err, again)
	}
	if dir := home.s.Dir(wire.DefaultTenant, "q", 0, 10); len(dir) != 3 || dir[0].Name != "a" || dir[1].Name != "c" || dir[2].Name != "d" {
		t.Fatalf("directory %+v", dir)
	}

	// Both survive a restart: the gone indexes and the drop still owed.
	other.s.Close()
	other.open()
	if got := other.s.PendingDrops(wire.DefaultTenant, "q"); len(got) != 1 || got[0] != 3 {
		t.Fatalf("pending drops after a restart: %v", got)
	}
	if pr := other.pushAt("q", "b", 1, r.Catalog.Inc); pr.Code != wire.CodePartitionGone {
		t.Fatalf("push to a removed index after a restart: %v", pr.Code)
	}
	home.s.Close()
	home.open()
	if dir := home.s.Dir(wire.DefaultTenant, "q", 0, 10); len(dir) != 3 {
		t.Fatalf("directory after a restart %+v", dir)
	}
}

// A Kafka topic's partitions are permanent; a partition holding a message
// stays, and so does one younger than the age.
func TestCleanupLeavesKafkaTopicsAndBusyPartitions(t *testing.T) {
	h := newHarness(t)
	h.allocTopic("k", 2)
	h.alloc("q", "held", "fresh")
	h.push("q", "held", "1")
	h.now += 2 * testCleanupMs
	h.alloc("q", "new")
	h.cleanTick(testCleanupMs)
	for _, name := range []string{"held", "new"} {
		if _, ok := h.s.PartitionByName(wire.DefaultTenant, "q", name); !ok {
			t.Fatalf("partition %q removed", name)
		}
	}
	if _, ok := h.s.PartitionByName(wire.DefaultTenant, "q", "fresh"); ok {
		t.Fatal("the never-pushed idle partition was kept")
	}
	for i := range uint32(2) {
		if _, ok := h.s.PartitionByIndex(wire.DefaultTenant, "k", i); !ok {
			t.Fatalf("Kafka partition %d removed", i)
		}
	}
}

// Replicas batch entries differently: a cleanup must decide the same
// whether the retention that emptied a partition is in the same apply
// batch or already committed.
func TestCleanupIsTheSameHoweverEntriesAreBatched(t *testing.T) {
	prepare := func() *harness {
		h := newHarness(t)
		h.retainCompleted("r", 60)
		h.push("r", "p", "1")
		h.consumeAll("r", 1)
		h.now += 120_000 + testCleanupMs
		return h
	}
	clean := wire.TickCmd{PartitionCleanupMs: testCleanupMs}
	retain := wire.AppendEntry(nil, 1_700_000_000_000+120_000+testCleanupMs, []wire.Command{{Kind: wire.KindTick}})
	remove := wire.AppendEntry(nil, 1_700_000_000_000+120_000+testCleanupMs, []wire.Command{{Kind: wire.KindTick, Body: clean.Encode(nil)}})

	together, apart := prepare(), prepare()
	together.index += 2
	if _, err := together.s.Update([]sm.Entry{{Index: together.index - 1, Cmd: retain}, {Index: together.index, Cmd: remove}}); err != nil {
		t.Fatal(err)
	}
	apart.applyEntry(retain)
	apart.applyEntry(remove)
	for _, h := range []*harness{together, apart} {
		if _, ok := h.s.PartitionByName(wire.DefaultTenant, "r", "p"); ok {
			t.Fatal("the emptied idle partition was kept")
		}
	}
	sameDump(t, together.dump(), apart.dump())
}

// ForgetDrops takes the named drops off the list whichever they are: the
// oldest in order (what the reconciler sends) or any others.
func TestForgetDropsTakesThemInAnyOrder(t *testing.T) {
	home, other := newGroupHarness(t, 0), newGroupHarness(t, 1)
	r := home.allocIn(twoGroups, "q", "a", "b", "c", "d", "e", "f")
	theirs := placedIn(r, 1) // 1, 3, 5
	if code := other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: theirs}); code != wire.CodeOK {
		t.Fatal(code)
	}
	other.now += testCleanupMs + 1
	other.cleanTick(testCleanupMs)
	forget := func(idx ...uint32) []uint32 {
		c := wire.DropDirCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: r.Catalog.Inc, Group: 1, Indexes: idx}
		if code := other.dropDir(wire.KindForgetDrops, c); code != wire.CodeOK {
			t.Fatal(code)
		}
		return other.s.PendingDrops(wire.DefaultTenant, "q")
	}
	if got := forget(3); len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Fatalf("after forgetting 3: %v", got)
	}
	if got := forget(1); len(got) != 1 || got[0] != 5 {
		t.Fatalf("after forgetting 1: %v", got)
	}
	if got := forget(5); len(got) != 0 {
		t.Fatalf("after forgetting 5: %v", got)
	}
	other.s.Close()
	other.open()
	if got := other.s.PendingDrops(wire.DefaultTenant, "q"); len(got) != 0 {
		t.Fatalf("after a reopen: %v", got)
	}
}
