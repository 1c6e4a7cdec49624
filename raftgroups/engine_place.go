package raftgroups

import (
	"context"
	"errors"
	"fmt"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Resolving where a queue's partitions live (docs/placement.md). The
// catalog and directory are read from this node's replica of the queue's
// home group; what is missing there is allocated by proposing AllocCmd to
// the home, which is idempotent, so a lagging replica only costs a round
// trip. A partition allocated in another group is created there by an
// EnsureShardCmd travelling in the same raft entry as the first write to
// it.

// Home is the group holding tenant's queue's catalog.
func (e *Engine) Home(tenant wire.ID, queue string) int { return e.place.Home(tenant, queue) }

// Catalog is a queue's catalog as this node's replica of its home holds it.
func (e *Engine) Catalog(tenant wire.ID, queue string) (wire.Catalog, bool) {
	cat, home, ok := e.GroupStore(e.Home(tenant, queue)).Catalog(tenant, queue)
	return cat, ok && home
}

// DirByName finds a partition of a queue by name in its directory.
func (e *Engine) DirByName(tenant wire.ID, queue, name string) (wire.DirEntry, bool) {
	return e.GroupStore(e.Home(tenant, queue)).DirByName(tenant, queue, name)
}

// DirByIndex finds a partition of a queue by index in its directory.
func (e *Engine) DirByIndex(tenant wire.ID, queue string, index uint32) (wire.DirEntry, bool) {
	return e.GroupStore(e.Home(tenant, queue)).DirByIndex(tenant, queue, index)
}

// Dir lists a queue's directory from index from, up to limit entries.
func (e *Engine) Dir(tenant wire.ID, queue string, from uint32, limit int) []wire.DirEntry {
	return e.GroupStore(e.Home(tenant, queue)).Dir(tenant, queue, from, limit)
}

// PartitionAt is a reader's handle on partition index of a queue, from this
// node's replica of the group holding it.
func (e *Engine) PartitionAt(tenant wire.ID, queue string, index uint32) (storage.Partition, bool) {
	d, ok := e.DirByIndex(tenant, queue, index)
	if !ok {
		return storage.Partition{}, false
	}
	return e.GroupStore(int(d.Group)).PartitionByIndex(tenant, queue, index)
}

// PartitionNamed is a reader's handle on a queue's partition by name.
func (e *Engine) PartitionNamed(tenant wire.ID, queue, name string) (storage.Partition, bool) {
	d, ok := e.DirByName(tenant, queue, name)
	if !ok {
		return storage.Partition{}, false
	}
	return e.GroupStore(int(d.Group)).PartitionByIndex(tenant, queue, d.Index)
}

// PartitionByID is a reader's handle on a partition by id: the id names
// the group that created it.
func (e *Engine) PartitionByID(tenant wire.ID, pid uint64) (storage.Partition, bool) {
	g := wire.GroupOfID(pid)
	if g >= len(e.host.groups) {
		return storage.Partition{}, false
	}
	return e.GroupStore(g).PartitionByID(tenant, pid)
}

// groupsOf lists the groups set in a catalog's group mask.
func groupsOf(mask uint64) []int {
	var out []int
	for g := 0; mask != 0; g++ {
		if mask&1 != 0 {
			out = append(out, g)
		}
		mask >>= 1
	}
	return out
}

// QueueGroups lists the groups holding partitions of a queue, the home
// first (it holds the subscriptions and timers even with no partition).
func (e *Engine) QueueGroups(tenant wire.ID, queue string) []int {
	home := e.Home(tenant, queue)
	out := []int{home}
	if cat, ok := e.Catalog(tenant, queue); ok {
		for _, g := range groupsOf(cat.Groups) {
			if g != home {
				out = append(out, g)
			}
		}
	}
	return out
}

// TenantGroups lists the groups a tenant's data may be in.
func (e *Engine) TenantGroups(tenant wire.ID) []int {
	set := e.place.TenantGroups(tenant)
	out := make([]int, len(set))
	for i, g := range set {
		out[i] = int(g)
	}
	return out
}

// allocReq asks for partitions of one queue.
type allocReq struct {
	tenant    wire.ID
	queue     string
	names     []string // by name (HTTP)
	count     uint32   // at least this many, by index (Kafka)
	create    bool     // create the queue (and the partitions) when missing
	kafka     bool     // a queue it creates is a Kafka topic
	namespace string
	task      string
	fresh     bool     // skip this node's replica: ask the home
	gone      []uint32 // indexes refused as removed: the home drops them first (with fresh)
}

// resolved is where a request's partitions are, and what must travel with
// the first write to each group for them to exist there.
type resolved struct {
	cat     wire.Catalog
	created bool
	parts   []wire.DirEntry              // names in order, then indexes 0..count-1
	ensure  map[int]*wire.EnsureShardCmd // by group
}

// prep is the EnsureShardCmd group n needs before the request's writes, if
// any, as a command.
func (r *resolved) prep(n int) []wire.Command {
	es := r.ensure[n]
	if es == nil {
		return nil
	}
	return []wire.Command{{Kind: wire.KindEnsureShard, Body: es.Encode(nil)}}
}

// resolve finds (and with create, allocates) the partitions a request
// names. ErrQueueNotFound / ErrPartitionNotFound when they do not exist and
// create is off.
func (e *Engine) resolve(ctx context.Context, r allocReq) (*resolved, error) {
	home := e.Home(r.tenant, r.queue)
	out := &resolved{}
	found := false
	if !r.fresh {
		out.parts, out.cat, found = e.lookupLocal(home, &r)
	}
	if !found {
		cmd := wire.AllocCmd{Tenant: r.tenant, Queue: r.queue, Names: r.names, Count: r.count,
			Namespace: r.namespace, Task: r.task, Place: e.place.Queue(r.tenant, r.queue), Gone: r.gone}
		if r.create {
			cmd.Flags |= wire.AllocCreate
		}
		if r.kafka {
			cmd.Flags |= wire.AllocKafka
		}
		res, err := proposeOne(ctx, e, home, wire.KindAlloc, cmd.Encode(nil), wire.DecodeAllocResult)
		if err != nil {
			return nil, err
		}
		if res.Code != wire.CodeOK {
			return nil, fmt.Errorf("raftgroups: allocate partitions of %q: %w", r.queue, res.Code.Err())
		}
		out.cat, out.created, out.parts = res.Catalog, res.Created, res.Parts
	}
	for _, d := range out.parts {
		g := int(d.Group)
		if g >= len(e.host.groups) {
			return nil, fmt.Errorf("raftgroups: partition %d of %q is in group %d, this node runs %d", d.Index, r.queue, g, len(e.host.groups))
		}
		// The home creates its own partitions with their directory
		// entries; another group needs them created unless this node's
		// replica of it shows them already.
		if g == home || (!r.fresh && e.GroupStore(g).HasPartitionAt(r.tenant, r.queue, out.cat.Inc, d.Index)) {
			continue
		}
		if out.ensure == nil {
			out.ensure = map[int]*wire.EnsureShardCmd{}
		}
		es := out.ensure[g]
		if es == nil {
			es = &wire.EnsureShardCmd{Tenant: r.tenant, Queue: r.queue, Catalog: out.cat,
				Subs: e.GroupStore(home).Subscriptions(r.tenant, r.queue)}
			out.ensure[g] = es
		}
		es.Parts = append(es.Parts, d)
	}
	return out, nil
}

// lookupLocal answers a request from this node's replica of the home when
// everything it names is there.
func (e *Engine) lookupLocal(home int, r *allocReq) ([]wire.DirEntry, wire.Catalog, bool) {
	st := e.GroupStore(home)
	cat, isHome, ok := st.Catalog(r.tenant, r.queue)
	if !ok || !isHome || cat.Partitions < r.count {
		return nil, cat, false
	}
	parts := make([]wire.DirEntry, 0, len(r.names)+int(r.count))
	for _, n := range r.names {
		d, ok := st.DirByName(r.tenant, r.queue, n)
		if !ok {
			return nil, cat, false
		}
		parts = append(parts, d)
	}
	for i := uint32(0); i < r.count; i++ {
		d, ok := st.DirByIndex(r.tenant, r.queue, i)
		if !ok {
			return nil, cat, false
		}
		parts = append(parts, d)
	}
	return parts, cat, true
}

// ensureShards creates a resolved request's partitions in their groups
// without writing to them (topic creation, so metadata and fetch find every
// partition before the first produce).
func (e *Engine) ensureShards(ctx context.Context, r *resolved) error {
	groups := make([]int, 0, len(r.ensure))
	for g := range r.ensure {
		groups = append(groups, g)
	}
	errs := make([]error, len(groups))
	fanOut(len(groups), func(i int) {
		res, err := e.Propose(ctx, groups[i], r.prep(groups[i])...)
		if err == nil {
			if code, _ := wire.ResultCode(res[0]); code != wire.CodeOK {
				err = code.Err()
			}
		}
		errs[i] = err
	})
	return errors.Join(errs...)
}

// staleShard reports a write refused because the group's shard is of
// another incarnation or lacks the partition: resolve again from the home.
func staleShard(code wire.Code) bool {
	return code == wire.CodeQueueNotFound || code == wire.CodePartitionNotFound || code == wire.CodePartitionGone ||
		code == wire.CodePartitionMoved // moved since this node's replica of the home said where (move.go)
}

// propagateCatalog carries a catalog's options and the home's
// subscriptions to every group holding partitions of the queue other than
// the home.
func (e *Engine) propagateCatalog(ctx context.Context, tenant wire.ID, queue string, cat wire.Catalog) error {
	home := e.Home(tenant, queue)
	var groups []int
	for _, g := range groupsOf(cat.Groups) {
		if g != home && g < len(e.host.groups) {
			groups = append(groups, g)
		}
	}
	cmd := wire.EnsureShardCmd{Tenant: tenant, Queue: queue, Catalog: cat, Subs: e.GroupStore(home).Subscriptions(tenant, queue)}
	body := cmd.Encode(nil)
	errs := make([]error, len(groups))
	fanOut(len(groups), func(i int) {
		_, errs[i] = e.Propose(ctx, groups[i], wire.Command{Kind: wire.KindEnsureShard, Body: body})
	})
	return errors.Join(errs...)
}

// dropShards deletes a deleted queue's shards in the groups other than the
// home.
func (e *Engine) dropShards(ctx context.Context, tenant wire.ID, queue string, inc, mask uint64) error {
	home := e.Home(tenant, queue)
	var groups []int
	for _, g := range groupsOf(mask) {
		if g != home && g < len(e.host.groups) {
			groups = append(groups, g)
		}
	}
	cmd := wire.DropShardCmd{Tenant: tenant, Queue: queue, Inc: inc}
	body := cmd.Encode(nil)
	errs := make([]error, len(groups))
	fanOut(len(groups), func(i int) {
		_, errs[i] = e.Propose(ctx, groups[i], wire.Command{Kind: wire.KindDropShard, Body: body})
	})
	return errors.Join(errs...)
}
