package raftgroups

import (
	"cmp"
	"slices"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Views of Kafka transactions for the admin APIs that look for hanging
// ones (KIP-664). Reads of this node's replicas only.

// LedTxns lists every transactional id of tenant this node coordinates,
// open or not, by id: the state each raft group of the tenant this node
// leads holds of the ids hashed onto it. As in Kafka, each node lists the
// ids it coordinates and clients merge the answers.
func (e *Engine) LedTxns(tenant wire.ID) []storage.TxnInfo {
	var out []storage.TxnInfo
	for _, g := range e.TenantGroups(tenant) {
		if !e.host.leads(e.host.groups[g]) {
			continue
		}
		for _, info := range e.GroupStore(g).KafkaTxnsOf(tenant) {
			if e.CoordinatorGroup(tenant, 't', info.TxnID) == g {
				out = append(out, info)
			}
		}
	}
	slices.SortFunc(out, func(a, b storage.TxnInfo) int { return cmp.Compare(a.TxnID, b.TxnID) })
	return out
}

// KafkaTxnPartitions lists the partitions info's transaction has open
// batches in, as this node's replicas of its raft groups hold them: the
// open transaction's, or the ended one's not yet resolved everywhere
// (the partitions still waiting for its marker). A transactional id's
// state names the raft groups a transaction staged in, not its
// partitions; each group's partitions keep their open batches by
// transaction, so the partitions are those of the state's groups holding
// batches of the transaction. None for a transaction ended and settled.
func (e *Engine) KafkaTxnPartitions(info storage.TxnInfo) []storage.TxnPartition {
	var xid wire.ID
	switch {
	case info.Ongoing:
		xid = storage.KafkaTxnXID(info)
	case !info.Unsettled.IsZero():
		xid = info.Unsettled
	default:
		return nil
	}
	var out []storage.TxnPartition
	for _, g := range groupsOf(info.Groups) {
		if g < len(e.host.groups) {
			out = append(out, e.GroupStore(g).KafkaTxnPartitions(info.Tenant, xid, info.ProducerID)...)
		}
	}
	storage.SortTxnPartitions(out)
	return out
}
