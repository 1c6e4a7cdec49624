package api

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
)

// maxListedTxns bounds the transactions one answer lists (the oldest
// first, the ones holding pops back longest); total says how many there
// are. A tenant has at most QUEEN_KAFKA_MAX_TENANT_TRANSACTIONAL_IDS.
const maxListedTxns = 1000

// txnView is an open Kafka transaction as the dashboard shows it.
type txnView struct {
	TransactionalID string `json:"transactionalId"`
	ProducerID      int64  `json:"producerId"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	// State is "Ongoing" for an open transaction, "Ending" for one ended
	// (committed, aborted, timed out) whose markers are not yet written
	// in every raft group it wrote to: both hold pops back.
	State string `json:"state"`
	// StartedAt is when an open transaction began (for one ending: when
	// it ended); ExpiresAt when the coordinator aborts an open one.
	StartedAt  string          `json:"startedAt"`
	TimeoutMs  uint32          `json:"timeoutMs"`
	ExpiresAt  string          `json:"expiresAt,omitempty"`
	Partitions []txnPartitionV `json:"partitions"`
}

type txnPartitionV struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// openTransactions is GET /api/v1/resources/transactions: the tenant's
// open Kafka transactions, for the dashboard. An open transaction holds
// back every pop of the partitions it wrote to (their last stable offset)
// until it ends or times out, so an operator needs to see which producer
// holds which (issue 33). It reads the view ListTransactions and
// DescribeTransactions read, from this node's replicas: each
// transactional id's state in the raft group coordinating it.
func (s *Server) openTransactions(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var open []storage.TxnInfo
	for _, g := range s.engine.TenantGroups(tenant) {
		for _, info := range s.engine.GroupStore(g).KafkaTxnsOf(tenant) {
			if (info.Ongoing || !info.Unsettled.IsZero()) && s.engine.CoordinatorGroup(tenant, 't', info.TxnID) == g {
				open = append(open, info)
			}
		}
	}
	slices.SortFunc(open, func(a, b storage.TxnInfo) int {
		return cmp.Or(cmp.Compare(txnBegan(a), txnBegan(b)), cmp.Compare(a.TxnID, b.TxnID))
	})
	ans := struct {
		Transactions []txnView `json:"transactions"`
		Total        int       `json:"total"`
	}{Transactions: []txnView{}, Total: len(open)}
	for _, info := range open[:min(len(open), maxListedTxns)] {
		v := txnView{TransactionalID: info.TxnID, ProducerID: info.ProducerID, ProducerEpoch: info.Epoch,
			State: "Ongoing", TimeoutMs: info.TimeoutMs, Partitions: []txnPartitionV{}}
		v.StartedAt = isoMillis(txnBegan(info))
		if info.Ongoing {
			v.ExpiresAt = isoMillis(info.BeganMs + int64(info.TimeoutMs))
		} else {
			v.State = "Ending"
		}
		for _, p := range s.engine.KafkaTxnPartitions(info) {
			v.Partitions = append(v.Partitions, txnPartitionV{Topic: p.Topic, Partition: p.Partition})
		}
		ans.Transactions = append(ans.Transactions, v)
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// txnBegan is when info's transaction began, or, for one ending, when it
// ended.
func txnBegan(info storage.TxnInfo) int64 {
	if info.Ongoing {
		return info.BeganMs
	}
	return info.EndedMs
}
