package storage

import (
	"encoding/binary"

	"github.com/queen-mq/queen/wire"
)

// Per-tenant counters (issue 33, docs/decisions.md). KV versions, trace ids
// and DLQ ids were numbered by counters every tenant of a raft group
// shares, so the gap between two of one tenant's ids counted the other
// tenants' writes. From formatTenantCounters each tenant has its own
// counter of each kind in each group, stored under the tenant's id. A
// tenant's first id of a kind after the raise continues from the shared
// counter as it stood then (the shared counter no longer moves), so no id
// handed out before is handed out again: a KV version seen once never
// comes back for a compare-and-set to match by accident, and trace and DLQ
// keys never collide. Below the format the shared counters go on as older
// builds apply them, so replicas of either build reach the same state.
//
// The counters are read through the apply batch, which sees the batch's
// own earlier writes, and kept nowhere else: nothing to load at boot or to
// rebuild after a snapshot.
const formatTenantCounters = wire.FormatV6

// Kinds of per-tenant counter.
const (
	counterKV    = 'v'
	counterTrace = 't'
	counterDLQ   = 'd'
)

// tenantCountersOn reports whether the group numbers per tenant.
func (s *Store) tenantCountersOn() bool { return s.at(formatTenantCounters) }

func tenantCounterKey(kind byte, tenant wire.ID) []byte {
	return append([]byte{tagCounters, 'T', kind}, tenant[:]...)
}

// lastTenantID is the last id of kind handed out to tenant: its counter,
// or shared, the group's shared counter frozen at the raise, before its
// first.
func (s *Store) lastTenantID(ctx *applyCtx, kind byte, tenant wire.ID, shared uint64) uint64 {
	if v, ok := ctx.get(tenantCounterKey(kind, tenant)); ok && len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return shared
}

// setTenantID records last as the last id of kind handed out to tenant.
func setTenantID(ctx *applyCtx, kind byte, tenant wire.ID, last uint64) {
	ctx.set(tenantCounterKey(kind, tenant), binary.BigEndian.AppendUint64(nil, last))
}

// nextTenantID hands out tenant's next id of kind.
func (s *Store) nextTenantID(ctx *applyCtx, kind byte, tenant wire.ID, shared uint64) uint64 {
	n := s.lastTenantID(ctx, kind, tenant, shared) + 1
	setTenantID(ctx, kind, tenant, n)
	return n
}

// nextDLQID hands out the next DLQ row id of tenant: the group's shared
// counter below formatTenantCounters, the tenant's own from it.
func (s *Store) nextDLQID(ctx *applyCtx, tenant wire.ID) uint64 {
	if !s.tenantCountersOn() {
		n := s.counters.nextDLQID
		s.counters.nextDLQID++
		return wire.GroupID(n, s.cfg.Group)
	}
	// counters.nextDLQID is the next shared one; the last handed out is
	// one less.
	return wire.GroupID(s.nextTenantID(ctx, counterDLQ, tenant, s.counters.nextDLQID-1), s.cfg.Group)
}
