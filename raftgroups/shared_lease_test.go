package raftgroups

import (
	"context"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// sharedPop pops queue "sh" for group g over up to 3 partitions, asking
// for a shared lease (the same id in every slot).
func sharedPop(ctx context.Context, t *testing.T, e *Engine) wire.PopResult {
	t.Helper()
	id := wire.ID{0: 0x5e, 6: 0x4d, 8: 0x9a, 10: 1, 11: 2, 12: 3, 13: 4, 14: 5}
	res, err := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "sh", Group: "g", Batch: 100, SubMode: wire.SubAll,
		LeaseIDs: []wire.ID{id, id, id}})
	if err != nil || res.Code != wire.CodeOK || len(res.Claims) != 3 {
		t.Fatalf("pop: %v %+v", err, res)
	}
	return res
}

func pushThree(ctx context.Context, t *testing.T, e *Engine) map[int]bool {
	t.Helper()
	groups := map[int]bool{}
	for _, p := range []string{"p0", "p1", "p2"} {
		out := pushTo(ctx, t, e, "sh", p, `1`, `2`)
		groups[wire.GroupOfID(out[0].PartitionID)] = true
	}
	if len(groups) != 3 {
		t.Fatalf("3 partitions in groups %v", groups)
	}
	return groups
}

// A pop over partitions in three groups leases them under one id, which
// names the groups and is tagged with the first claim's; one extend
// renews all three.
func TestPopSharesOneLeaseAcrossGroups(t *testing.T) {
	c := newTestCluster(t, 1, 3)
	c.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !atFormat(c.hosts[0], wire.FormatV4) {
		if ctx.Err() != nil {
			t.Fatal("groups not raised to FormatV4")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e := c.engines[0]
	pushThree(ctx, t, e)
	res := sharedPop(ctx, t, e)
	id := res.Claims[0].LeaseID
	if !wire.IsSharedLease(id) || wire.GroupOfTag(id) != wire.GroupOfID(res.Claims[0].PartitionID) {
		t.Fatalf("lease %s: shared %v, tag %d, first claim in group %d", id, wire.IsSharedLease(id), wire.GroupOfTag(id),
			wire.GroupOfID(res.Claims[0].PartitionID))
	}
	for _, cl := range res.Claims {
		if cl.LeaseID != id || wire.SharedLeaseGroups(id)&(1<<wire.GroupOfID(cl.PartitionID)) == 0 {
			t.Fatalf("claim %+v under %s (groups %b)", cl, id, wire.SharedLeaseGroups(id))
		}
	}
	ext, err := e.ExtendLease(ctx, &wire.ExtendLeaseCmd{Tenant: wire.DefaultTenant, LeaseID: id, Ms: 60_000})
	if err != nil || ext.Code != wire.CodeOK || ext.Renewed != 3 {
		t.Fatalf("extend: %v %+v", err, ext)
	}
	// An id naming groups that do not hold it renews nothing.
	other := wire.SharedLeaseID(wire.ID{10: 9}, wire.SharedLeaseGroups(id), 0)
	if ext, err := e.ExtendLease(ctx, &wire.ExtendLeaseCmd{Tenant: wire.DefaultTenant, LeaseID: other, Ms: 60_000}); err != nil ||
		ext.Code != wire.CodeLeaseNotFound || ext.Renewed != 0 {
		t.Fatalf("extend of an unknown shared id: %v %+v", err, ext)
	}
}

// While the groups are below FormatV4 (a rolling upgrade) a pop asking for
// a shared lease gets one lease per partition, each tagged with its group.
func TestPopSharesNoLeaseBelowFormatV4(t *testing.T) {
	c := newTestClusterWith(t, 1, 3, 0, func(cfg *Config) { cfg.HoldFormat = true })
	c.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := c.engines[0]
	pushThree(ctx, t, e)
	res := sharedPop(ctx, t, e)
	seen := map[wire.ID]bool{}
	for _, cl := range res.Claims {
		if wire.IsSharedLease(cl.LeaseID) || seen[cl.LeaseID] || wire.GroupOfTag(cl.LeaseID) != wire.GroupOfID(cl.PartitionID) {
			t.Fatalf("claim %+v below FormatV4", cl)
		}
		seen[cl.LeaseID] = true
		ext, err := e.ExtendLease(ctx, &wire.ExtendLeaseCmd{Tenant: wire.DefaultTenant, LeaseID: cl.LeaseID, Ms: 60_000})
		if err != nil || ext.Code != wire.CodeOK || ext.Renewed != 1 {
			t.Fatalf("extend %s: %v %+v", cl.LeaseID, err, ext)
		}
	}
}

func atFormat(h *Host, v uint32) bool {
	st := h.Format()
	for _, f := range st.Active {
		if f < v {
			return false
		}
	}
	return len(st.Active) > 0
}
