package raftgroups

import (
	"cmp"
	"slices"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Views over every group. A queue's state is spread over its home and its
// shards; these read each from this node's replicas and merge them, so the
// front doors render one queue, one consumer group, one dead-letter queue,
// wherever their parts live. Reads only: writes go through proposals.

// Stores lists this node's store of every group, for views that span all
// tenants (metrics).
func (e *Engine) Stores() []*storage.Store {
	out := make([]*storage.Store, len(e.host.groups))
	for i, g := range e.host.groups {
		out[i] = g.store
	}
	return out
}

// TenantStores lists the stores a tenant's data may be in.
func (e *Engine) TenantStores(tenant wire.ID) []*storage.Store {
	groups := e.TenantGroups(tenant)
	out := make([]*storage.Store, len(groups))
	for i, g := range groups {
		out[i] = e.GroupStore(g)
	}
	return out
}

// KVStore is the store holding a tenant's KV and locks.
func (e *Engine) KVStore(tenant wire.ID) *storage.Store { return e.GroupStore(e.KVGroup(tenant)) }

// HomeStore is the store holding a queue's catalog and timers.
func (e *Engine) HomeStore(tenant wire.ID, queue string) *storage.Store {
	return e.GroupStore(e.Home(tenant, queue))
}

// Queue is a queue's metadata from its home (Partitions counts them all).
func (e *Engine) Queue(tenant wire.ID, name string) (storage.QueueInfo, bool) {
	q, ok := e.HomeStore(tenant, name).Queue(tenant, name)
	if !ok || !q.Home {
		return storage.QueueInfo{}, false
	}
	return q, true
}

// Queues merges the views of the tenant's queues matching f from every
// group holding part of them: the home's metadata and subscriptions, every
// group's partitions (by index), dead-letter rows and activity added up.
func (e *Engine) Queues(tenant wire.ID, f storage.QueueFilter, nowMs int64) []storage.QueueView {
	groups := e.TenantGroups(tenant)
	if f.Name != "" {
		groups = e.QueueGroups(tenant, f.Name)
	}
	per := make([][]storage.QueueView, len(groups))
	for i, g := range groups {
		// Filters on labels apply to the home's copy; a shard's
		// labels follow it.
		per[i] = e.GroupStore(g).Queues(tenant, storage.QueueFilter{Name: f.Name, Partitions: f.Partitions,
			PartitionsFrom: f.PartitionsFrom, PartitionLimit: f.PartitionLimit}, nowMs)
	}
	return mergeQueueViews(per, f)
}

// AllQueues merges every tenant's queues for metrics, with the partitions
// of each group holding at most maxPartitions of a queue.
func (e *Engine) AllQueues(nowMs int64, maxPartitions int) []storage.QueueView {
	per := make([][]storage.QueueView, len(e.host.groups))
	for i, g := range e.host.groups {
		per[i] = g.store.AllQueues(nowMs, maxPartitions)
	}
	return mergeQueueViews(per, storage.QueueFilter{Partitions: true})
}

type queueName struct {
	tenant wire.ID
	name   string
}

func mergeQueueViews(per [][]storage.QueueView, f storage.QueueFilter) []storage.QueueView {
	by := map[queueName]*storage.QueueView{}
	var shards []storage.QueueView
	for _, vs := range per {
		for _, v := range vs {
			if !v.Home {
				shards = append(shards, v)
				continue
			}
			v := v
			by[queueName{v.Tenant, v.Name}] = &v
		}
	}
	for _, s := range shards {
		v := by[queueName{s.Tenant, s.Name}]
		if v == nil {
			continue // a shard without its catalog here: deleted, or not applied yet
		}
		v.Partitions = append(v.Partitions, s.Partitions...)
		v.Totals.Add(s.Totals)
		v.Appended += s.Appended
		for g, l := range s.Lags {
			if v.Lags == nil {
				v.Lags = map[string]storage.GroupLag{}
			}
			m := v.Lags[g]
			m.Cursors += l.Cursors
			m.Lag += l.Lag
			v.Lags[g] = m
		}
		v.DLQRows += s.DLQRows
		v.Activity.Add(&s.Activity)
	}
	out := make([]storage.QueueView, 0, len(by))
	for _, v := range by {
		if (f.Namespace != "" && v.Namespace != f.Namespace) || (f.Task != "" && v.Task != f.Task) {
			continue
		}
		slices.SortFunc(v.Partitions, func(a, b storage.PartitionView) int { return cmp.Compare(a.Index, b.Index) })
		// Each group copied its first PartitionLimit from PartitionsFrom:
		// the queue's first that many are among them.
		if f.PartitionLimit > 0 && len(v.Partitions) > f.PartitionLimit {
			v.Partitions = v.Partitions[:f.PartitionLimit]
		}
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b storage.QueueView) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), slices.Compare(a.Tenant[:], b.Tenant[:]))
	})
	return out
}

// Series merges the per-minute activity of the tenant's queues (one queue
// when queue is set) over every group.
func (e *Engine) Series(tenant wire.ID, queue string, fromMs, toMs int64) []storage.MinuteActivity {
	var out []storage.MinuteActivity
	for _, st := range e.TenantStores(tenant) {
		out = storage.MergeSeries(out, st.Series(tenant, queue, fromMs, toMs))
	}
	return out
}

// AllSeries merges every group's activity.
func (e *Engine) AllSeries(fromMs, toMs int64) []storage.MinuteActivity {
	var out []storage.MinuteActivity
	for _, g := range e.host.groups {
		out = storage.MergeSeries(out, g.store.AllSeries(fromMs, toMs))
	}
	return out
}

// QueuesLabelled lists the tenant's queues with a namespace and task
// (either may be empty: any), from their homes.
func (e *Engine) QueuesLabelled(tenant wire.ID, namespace, task string) []string {
	var out []string
	for _, st := range e.TenantStores(tenant) {
		out = append(out, st.QueuesLabelled(tenant, namespace, task)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// GroupPositions merges a consumer group's positions over every group
// holding the queue's partitions (every queue when queue is empty).
func (e *Engine) GroupPositions(tenant wire.ID, group, queue string) []storage.GroupPosition {
	groups := e.TenantGroups(tenant)
	if queue != "" {
		groups = e.QueueGroups(tenant, queue)
	}
	var out []storage.GroupPosition
	for _, g := range groups {
		out = append(out, e.GroupStore(g).GroupPositions(tenant, group, queue)...)
	}
	slices.SortFunc(out, func(a, b storage.GroupPosition) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Index, b.Index))
	})
	return out
}

// TxnStagedPositions merges, over every group holding the queue's
// partitions (every queue when queue is empty), the partitions where a
// consumer group has offsets staged by a Kafka transaction not yet
// resolved there.
func (e *Engine) TxnStagedPositions(tenant wire.ID, group, queue string) []storage.StagedPosition {
	groups := e.TenantGroups(tenant)
	if queue != "" {
		groups = e.QueueGroups(tenant, queue)
	}
	var out []storage.StagedPosition
	for _, g := range groups {
		for _, sp := range e.GroupStore(g).TxnStagedPositions(tenant, group) {
			if queue == "" || sp.Queue == queue {
				out = append(out, sp)
			}
		}
	}
	return out
}

// DLQ merges the tenant's dead-letter rows matching f over every group,
// newest first, skipping skip and returning at most limit, with the number
// of all matching rows.
func (e *Engine) DLQ(tenant wire.ID, f storage.DLQFilter, skip, limit int) ([]storage.DLQRow, int, error) {
	stores := e.TenantStores(tenant)
	if f.PartitionID != 0 {
		if g := wire.GroupOfID(f.PartitionID); g < len(e.host.groups) {
			stores = []*storage.Store{e.GroupStore(g)}
		}
	}
	var all []storage.DLQRow
	total := 0
	for _, st := range stores {
		rows, n, err := st.DLQ(tenant, f, 0, skip+limit)
		if err != nil {
			return nil, 0, err
		}
		all = append(all, rows...)
		total += n
	}
	slices.SortFunc(all, func(a, b storage.DLQRow) int {
		return cmp.Or(cmp.Compare(b.FailedMs, a.FailedMs), cmp.Compare(b.ID, a.ID))
	})
	if skip >= len(all) {
		return nil, total, nil
	}
	all = all[skip:]
	if len(all) > limit {
		all = all[:limit]
	}
	e.openDLQRows(all)
	return all, total, nil
}

// DLQRowByID finds a dead-letter row in the group its id names.
func (e *Engine) DLQRowByID(tenant wire.ID, id uint64) (storage.DLQRow, bool, error) {
	g := wire.GroupOfID(id)
	if g >= len(e.host.groups) {
		return storage.DLQRow{}, false, nil
	}
	row, ok, err := e.GroupStore(g).DLQRowByID(tenant, id)
	if ok {
		rows := []storage.DLQRow{row}
		e.openDLQRows(rows)
		row = rows[0]
	}
	return row, ok, err
}

// MessageByTxn finds a message by partition id and transaction id.
func (e *Engine) MessageByTxn(tenant wire.ID, pid uint64, txn string) (storage.StoredMessage, bool, error) {
	g := wire.GroupOfID(pid)
	if g >= len(e.host.groups) {
		return storage.StoredMessage{}, false, nil
	}
	return e.GroupStore(g).MessageByTxn(tenant, pid, txn)
}

// Timers lists a queue's timers, from its home.
func (e *Engine) TimersOf(tenant wire.ID, queue, prefix, after string, limit int) ([]storage.TimerInfo, bool, error) {
	return e.HomeStore(tenant, queue).Timers(tenant, queue, prefix, after, limit)
}

// Timer is one timer, from its queue's home.
func (e *Engine) Timer(tenant wire.ID, queue, key string) (storage.TimerInfo, bool, error) {
	return e.HomeStore(tenant, queue).Timer(tenant, queue, key)
}

// TracesOf lists a message's trace events, from its partition's group.
func (e *Engine) TracesOf(tenant wire.ID, pid uint64, txn string) ([]storage.TraceEvent, error) {
	g := wire.GroupOfID(pid)
	if g >= len(e.host.groups) {
		return nil, nil
	}
	evs, err := e.GroupStore(g).TracesOf(tenant, pid, txn)
	e.openTraces(evs)
	return evs, err
}

// TracesByName merges the newest trace events with a name over every group
// (events live in their partition's group), newest first, at most limit.
// Each store answers its newest limit, so the merged newest are among them.
func (e *Engine) TracesByName(tenant wire.ID, name string, limit int) ([]storage.TraceEvent, error) {
	var out []storage.TraceEvent
	for _, st := range e.TenantStores(tenant) {
		evs, err := st.TracesByName(tenant, name, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	// Stable: a store's events of one millisecond keep its newest-first order.
	slices.SortStableFunc(out, func(a, b storage.TraceEvent) int { return cmp.Compare(b.CreatedMs, a.CreatedMs) })
	out = out[:min(len(out), limit)]
	e.openTraces(out)
	return out, nil
}

// TraceNames merges the trace names in use over every group.
func (e *Engine) TraceNames(tenant wire.ID, limit int) ([]string, error) {
	var out []string
	for _, st := range e.TenantStores(tenant) {
		names, err := st.TraceNames(tenant, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ChangedPartitions lists the partitions of a queue written since sinceMs,
// by index after after, up to limit, over every group holding them.
func (e *Engine) ChangedPartitions(tenant wire.ID, queue string, sinceMs int64, after int64, limit int) (parts []storage.Partition, more, ok bool) {
	if _, exists := e.Catalog(tenant, queue); !exists {
		return nil, false, false
	}
	for _, g := range e.QueueGroups(tenant, queue) {
		ps, m, _ := e.GroupStore(g).ChangedPartitions(tenant, queue, sinceMs, after, limit+1)
		parts = append(parts, ps...)
		more = more || m
	}
	slices.SortFunc(parts, func(a, b storage.Partition) int { return cmp.Compare(a.Index, b.Index) })
	if len(parts) > limit {
		parts, more = parts[:limit], true
	}
	return parts, more, true
}

// Parked counts the requests parked on each queue's change notifications
// on this node (long-polling pops and fetches), by tenant and queue.
func (e *Engine) Parked() map[wire.ID]map[string]int {
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
	out := map[wire.ID]map[string]int{}
	for k, l := range e.watch.m {
		if out[k.tenant] == nil {
			out[k.tenant] = map[string]int{}
		}
		out[k.tenant][k.queue] += l.waiters
	}
	return out
}
