package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// newGroupHarness is a store that is group g of a node with several groups.
func newGroupHarness(t *testing.T, g int) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), now: 1_700_000_000_000}
	h.s = New(Config{Dir: h.dir, Group: g})
	idx, err := h.s.Open(make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	h.index = idx
	t.Cleanup(func() { h.s.Close() })
	return h
}

// twoGroups spreads queue "q" over groups 0 (home) and 1.
var twoGroups = wire.Placement{Groups: []uint16{0, 1}, Start: 0}

func (h *harness) allocIn(place wire.Placement, queue string, names ...string) wire.AllocResult {
	h.t.Helper()
	c := wire.AllocCmd{Tenant: wire.DefaultTenant, Queue: queue, Flags: wire.AllocCreate, Place: place, Names: names}
	r, err := wire.DecodeAllocResult(h.apply(wire.KindAlloc, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) ensure(c wire.EnsureShardCmd) wire.Code {
	h.t.Helper()
	code, _ := wire.ResultCode(h.apply(wire.KindEnsureShard, c.Encode(nil)))
	return code
}

// The home allocates partitions round-robin over the placement and creates
// its own; another group creates its share from the directory entries the
// engine carries, at the same indexes.
func TestAllocPlacesPartitionsAndShardsCreateTheirs(t *testing.T) {
	home, other := newGroupHarness(t, 0), newGroupHarness(t, 1)
	r := home.allocIn(twoGroups, "q", "a", "b", "c", "d")
	if r.Code != wire.CodeOK || !r.Created || r.Catalog.Partitions != 4 || r.Catalog.Inc == 0 {
		t.Fatalf("alloc: %+v", r)
	}
	var theirs []wire.DirEntry
	for i, d := range r.Parts {
		if d.Index != uint32(i) || int(d.Group) != i%2 {
			t.Fatalf("partition %d placed %+v", i, d)
		}
		if d.Group == 1 {
			theirs = append(theirs, d)
		}
	}
	if _, ok := home.s.PartitionByName(wire.DefaultTenant, "q", "a"); !ok {
		t.Fatal("the home did not create its own partition")
	}
	if _, ok := home.s.PartitionByName(wire.DefaultTenant, "q", "b"); ok {
		t.Fatal("the home created another group's partition")
	}
	// Asking again allocates nothing new.
	if again := home.allocIn(twoGroups, "q", "b", "e"); again.Created || again.Parts[0].Index != 1 || again.Parts[1].Index != 4 {
		t.Fatalf("second alloc: %+v", again)
	}
	if code := other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: theirs}); code != wire.CodeOK {
		t.Fatal(code)
	}
	p, ok := other.s.PartitionByIndex(wire.DefaultTenant, "q", 3)
	if !ok || p.Name != "d" || wire.GroupOfID(p.ID) != 1 {
		t.Fatalf("shard partition %+v %v", p, ok)
	}
	if cat, isHome, ok := other.s.Catalog(wire.DefaultTenant, "q"); !ok || isHome || cat.Inc != r.Catalog.Inc {
		t.Fatalf("shard catalog %+v home=%v", cat, isHome)
	}
	// A partition placed elsewhere is refused, and so is a push to a
	// partition the shard does not hold.
	if code := other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: r.Parts[:1]}); code != wire.CodeBadRequest {
		t.Fatalf("misplaced partition: %v", code)
	}
	push := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "a", PartitionIndex: -1, Inc: r.Catalog.Inc,
		Count: 1, Records: wire.AppendRecord(nil, &wire.Record{MsgID: wire.ID{1}, Payload: []byte("x")})}
	if pr, _ := wire.DecodePushResult(other.apply(wire.KindPush, push.Encode(nil))); pr.Code != wire.CodePartitionNotFound {
		t.Fatalf("push to a partition of another group: %+v", pr)
	}
}

// A queue deleted and created again gets a new incarnation: a push naming
// the old one is refused, a shard of the old one is replaced by the new
// one's, and the old one's shard can never replace the new.
func TestIncarnationsKeepShardsOfADeletedQueueApart(t *testing.T) {
	home, other := newGroupHarness(t, 0), newGroupHarness(t, 1)
	first := home.allocIn(twoGroups, "q", "a", "b")
	other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: first.Catalog, Parts: first.Parts[1:]})
	rec := wire.AppendRecord(nil, &wire.Record{MsgID: wire.ID{1}, Payload: []byte("old")})
	push := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "b", PartitionIndex: -1, Inc: first.Catalog.Inc, Count: 1, Records: rec}
	if pr, _ := wire.DecodePushResult(other.apply(wire.KindPush, push.Encode(nil))); pr.Code != wire.CodeOK {
		t.Fatalf("push: %+v", pr)
	}
	del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "q"}
	d, _ := wire.DecodeDeleteQueueResult(home.apply(wire.KindDeleteQueue, del.Encode(nil)))
	if d.Code != wire.CodeOK || d.Inc != first.Catalog.Inc || d.Groups != 0b11 {
		t.Fatalf("delete at home: %+v", d)
	}
	second := home.allocIn(twoGroups, "q", "b")
	if second.Catalog.Inc <= first.Catalog.Inc {
		t.Fatalf("incarnations %d then %d", first.Catalog.Inc, second.Catalog.Inc)
	}
	push.Inc = second.Catalog.Inc
	if pr, _ := wire.DecodePushResult(other.apply(wire.KindPush, push.Encode(nil))); pr.Code != wire.CodeQueueNotFound {
		t.Fatalf("push naming the new incarnation into the old shard: %+v", pr)
	}
	// The new incarnation's partition "b" is index 0, in the home.
	if second.Parts[0].Index != 0 || second.Parts[0].Group != 0 {
		t.Fatalf("new b: %+v", second.Parts[0])
	}
	// The old shard is replaced by the new one's (it held an old "b").
	more := home.allocIn(twoGroups, "q", "c")
	if code := other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: more.Catalog, Parts: more.Parts}); code != wire.CodeOK {
		t.Fatal(code)
	}
	if p, ok := other.s.PartitionByName(wire.DefaultTenant, "q", "c"); !ok || p.HighWatermark() != 0 {
		t.Fatalf("new shard partition %+v %v", p, ok)
	}
	if _, ok := other.s.PartitionByName(wire.DefaultTenant, "q", "b"); ok {
		t.Fatal("the old incarnation's partition survived")
	}
	// The old incarnation can no longer touch it.
	if code := other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: first.Catalog}); code != wire.CodeQueueNotFound {
		t.Fatalf("an older incarnation replaced a newer shard: %v", code)
	}
	drop := wire.DropShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Inc: first.Catalog.Inc}
	if c, _ := wire.ResultCode(other.apply(wire.KindDropShard, drop.Encode(nil))); c != wire.CodeNotFound {
		t.Fatalf("dropping the old incarnation dropped the new: %v", c)
	}
	drop.Inc = more.Catalog.Inc
	if c, _ := wire.ResultCode(other.apply(wire.KindDropShard, drop.Encode(nil))); c != wire.CodeOK {
		t.Fatal(c)
	}
	if _, _, ok := other.s.Catalog(wire.DefaultTenant, "q"); ok {
		t.Fatal("shard not dropped")
	}
}

// Options change at the home with a new version; a shard takes a newer
// version and ignores an older one, whatever order they arrive in.
func TestShardsTakeOnlyNewerOptions(t *testing.T) {
	home, other := newGroupHarness(t, 0), newGroupHarness(t, 1)
	r := home.allocIn(twoGroups, "q", "a", "b")
	other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: r.Parts[1:]})
	cfg := wire.DefaultQueueConfig()
	cfg.LeaseTimeSec = 7
	c := wire.ConfigureCmd{Tenant: wire.DefaultTenant, Queue: "q", Set: wire.OptLeaseTime, Config: cfg}
	res, _ := wire.DecodeConfigureResult(home.apply(wire.KindConfigure, c.Encode(nil)))
	if res.Code != wire.CodeOK || res.Catalog.CfgVer != r.Catalog.CfgVer+1 || res.Catalog.Groups != 0b11 {
		t.Fatalf("configure: %+v", res)
	}
	if code := other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: res.Catalog}); code != wire.CodeOK {
		t.Fatal(code)
	}
	if code := other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog}); code != wire.CodeOK {
		t.Fatal(code)
	}
	if q, _ := other.s.Queue(wire.DefaultTenant, "q"); q.Config.LeaseTimeSec != 7 {
		t.Fatalf("shard options %+v", q.Config)
	}
	// Configure reaching a group that is not the queue's home is refused.
	c.Place = wire.Placement{Groups: []uint16{0, 1}, Start: 0}
	c.Queue = "elsewhere"
	if res, _ := wire.DecodeConfigureResult(other.apply(wire.KindConfigure, c.Encode(nil))); res.Code != wire.CodeBadRequest {
		t.Fatalf("configure at the wrong group: %+v", res)
	}
}

// A consumer group subscribes once, at the home; pops carry the
// subscription so every group starts untouched partitions from the same
// instant.
func TestPopsCarryTheHomeSubscription(t *testing.T) {
	home, other := newGroupHarness(t, 0), newGroupHarness(t, 1)
	r := home.allocIn(twoGroups, "q", "a", "b")
	other.ensure(wire.EnsureShardCmd{Tenant: wire.DefaultTenant, Queue: "q", Catalog: r.Catalog, Parts: r.Parts[1:]})
	rec := func(id byte) []byte {
		return wire.AppendRecord(nil, &wire.Record{MsgID: wire.ID{id}, Payload: []byte("x")})
	}
	push := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "b", PartitionIndex: -1, Inc: r.Catalog.Inc, Count: 1, Records: rec(1)}
	other.apply(wire.KindPush, push.Encode(nil)) // before the subscription: not for "new"
	home.now += 1000
	other.now += 1000
	sub := wire.SubscribeCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Mode: wire.SubNew}
	s1, _ := wire.DecodeSubscribeResult(home.apply(wire.KindSubscribe, sub.Encode(nil)))
	if s1.Code != wire.CodeOK || s1.Sub.CreatedMs != home.now {
		t.Fatalf("subscribe: %+v", s1)
	}
	home.now += 5000
	if s2, _ := wire.DecodeSubscribeResult(home.apply(wire.KindSubscribe, sub.Encode(nil))); s2.Sub != s1.Sub {
		t.Fatalf("second subscribe changed it: %+v", s2)
	}
	other.now += 2000
	push.Records = rec(2)
	other.apply(wire.KindPush, push.Encode(nil)) // after it
	other.now += 2000
	pop := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 10, SubMode: s1.Sub.Mode,
		SubCreatedMs: s1.Sub.CreatedMs, LeaseIDs: []wire.ID{{9}}}
	res, _ := wire.DecodePopResult(other.apply(wire.KindPop, pop.Encode(nil)))
	if len(res.Claims) != 1 || res.Claims[0].From != 1 || res.Claims[0].To != 2 {
		t.Fatalf("pop in the other group: %+v", res)
	}
}

// The home counts its directory's partitions per group as it allocates
// them and again when it loads, so a shard's completeness check never
// copies a directory of millions of entries.
func TestHomeCountsItsDirectoryPerGroup(t *testing.T) {
	home := newGroupHarness(t, 0)
	home.allocIn(twoGroups, "q", "a", "b", "c", "d", "e")
	check := func(when string) {
		t.Helper()
		for g, want := range []int{3, 2, 0} {
			if got := home.s.DirInGroup(wire.DefaultTenant, "q", g); got != want {
				t.Fatalf("%s: group %d holds %d partitions by the count, %d by the directory", when, g, got, want)
			}
		}
		if got := home.s.DirInGroup(wire.DefaultTenant, "missing", 0); got != 0 {
			t.Fatalf("%s: a missing queue counts %d", when, got)
		}
	}
	check("allocated")
	home.s.Close()
	home.open()
	check("reopened")
}
