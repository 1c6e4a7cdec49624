package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/wire"
)

// Per-tenant caps on Kafka consumer groups and transactional ids (issue
// 33): each costs every node memory and walks (ListGroups, the
// transaction views, snapshots), and nothing else bounded them: a tenant
// made 3,000 of each in 4 s. The defaults are far above what one
// application uses; QUEEN_KAFKA_MAX_TENANT_GROUPS and
// QUEEN_KAFKA_MAX_TENANT_TRANSACTIONAL_IDS change them.
//
// The count is read from this node's replicas (storage
// views_tenant_caps.go), so every node counts what the log committed, plus
// what this node's coordinators and share groups hold in memory and have
// not recorded yet. As with the partition caps, requests racing on
// different nodes may together pass a cap by a few; a held group or id is
// never refused, so the cap never breaks what already works.
//
// The answers are the authorization codes of the APIs that make them,
// GROUP_AUTHORIZATION_FAILED and TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
// they are in every client's error tables for JoinGroup, OffsetCommit,
// ConsumerGroupHeartbeat and InitProducerId and are fatal there, so a
// client stops with a clear error instead of retrying; POLICY_VIOLATION
// is not one of those APIs' errors and some clients would retry it.
const (
	DefaultMaxTenantGroups = 10000
	DefaultMaxTenantTxnIDs = 10000
)

// admitGroup reports whether the tenant may use consumer group name: one
// it already has, or a new one while it has fewer than MaxTenantGroups.
//
// A new group's id must also be a clean name (wire.CleanName), as HTTP
// names are: a group id holding U+202E was shown reversed in listings and
// the dashboard (issue 33). Groups made before the rule go on working.
func (b *Broker) admitGroup(tenant wire.ID, coord *groups.Coordinator, name string) *kerr.Error {
	if coord != nil && coord.Has(name) {
		return nil
	}
	seen := map[string]struct{}{}
	for _, g := range b.engine.TenantGroups(tenant) {
		b.engine.GroupStore(g).AddGroupNames(tenant, seen)
	}
	if coords, kErr := b.ledCoordinators(tenant); kErr == nil {
		for _, c := range coords {
			for _, l := range c.List() {
				seen[l.Group] = struct{}{}
			}
		}
	}
	for _, s := range b.shares.names(tenant) {
		seen[s] = struct{}{}
	}
	switch _, ok := seen[name]; {
	case ok:
		return nil
	case !wire.CleanName(name):
		return kerr.InvalidGroupID
	case len(seen) >= b.cfg.MaxTenantGroups:
		return kerr.GroupAuthorizationFailed
	}
	return nil
}

// txnMaxTimeout is the longest transaction timeout the tenant's producers
// may ask for. An open transaction holds back every HTTP pop of the
// partitions it wrote to (the last stable offset), so in tenancy mode a
// produce-only key could stall a partition's consumers for the node's 15
// minutes: a tenant gets MaxTenantTxnTimeout (a minute by default, Kafka's
// default transaction.timeout.ms), the default tenant, which is the whole
// node, TxnMaxTimeout.
func (b *Broker) txnMaxTimeout(tenant wire.ID) time.Duration {
	if tenant == wire.DefaultTenant {
		return b.cfg.TxnMaxTimeout
	}
	return b.cfg.MaxTenantTxnTimeout
}

// admitTxnID reports whether the tenant may use transactional id id: one
// it already has, or a new one while it has fewer than MaxTenantTxnIDs.
func (b *Broker) admitTxnID(tenant wire.ID, id string) *kerr.Error {
	total := 0
	for _, g := range b.engine.TenantGroups(tenant) {
		n, has := b.engine.GroupStore(g).KafkaTxnIDs(tenant, id)
		if has {
			return nil
		}
		total += n
	}
	if total < b.cfg.MaxTenantTxnIDs {
		return nil
	}
	return kerr.TransactionalIDAuthorizationFailed
}
