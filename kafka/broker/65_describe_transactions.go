package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Kafka's transaction states, as DescribeTransactions and ListTransactions
// name them. Queen's state of a transactional id gives the first six;
// Dead and PrepareEpochFence are Kafka's own steps and never shown, but
// are valid filters.
const (
	txnEmpty          = "Empty"
	txnOngoing        = "Ongoing"
	txnPrepareCommit  = "PrepareCommit"
	txnPrepareAbort   = "PrepareAbort"
	txnCompleteCommit = "CompleteCommit"
	txnCompleteAbort  = "CompleteAbort"
)

var txnStates = map[string]bool{
	txnEmpty: true, txnOngoing: true, txnPrepareCommit: true, txnPrepareAbort: true,
	txnCompleteCommit: true, txnCompleteAbort: true, "Dead": true, "PrepareEpochFence": true,
}

// txnStateOf is a transactional id's state as Kafka names it: Empty before
// its first transaction; Ongoing while one is open; once it ended,
// PrepareCommit or PrepareAbort until every raft group it staged in has
// resolved it (written its markers), then CompleteCommit or CompleteAbort
// until the next begins. An InitProducerId does not make it Empty again:
// the state keeps how the last transaction ended.
func txnStateOf(info storage.TxnInfo) string {
	switch {
	case info.Ongoing:
		return txnOngoing
	case !info.Unsettled.IsZero() && info.LastCommitted:
		return txnPrepareCommit
	case !info.Unsettled.IsZero():
		return txnPrepareAbort
	case info.TxnSeq == 0:
		return txnEmpty
	case info.LastCommitted:
		return txnCompleteCommit
	}
	return txnCompleteAbort
}

// txnStartMs is when a transactional id's current or last transaction
// began (the cluster's clock), -1 before its first.
func txnStartMs(info storage.TxnInfo) int64 {
	if info.TxnSeq == 0 {
		return -1
	}
	return info.BeganMs
}

// describingTxns is 0 when this node may describe the transactional ids
// raft group g coordinates: it leads g and has applied everything g
// committed before its term; else the code to answer.
func (b *Broker) describingTxns(g int) int16 {
	_, caughtUp, err := b.leading(g, -1)
	switch {
	case err != nil:
		return kerr.NotCoordinator.Code
	case !caughtUp:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// handleDescribeTransactions (key 65, v0, KIP-664) describes transactional
// ids this node coordinates, from their state in the raft group each
// hashes onto: state, producer id and epoch, timeout, when the current or
// last transaction began, and the partitions holding its batches. The
// state records the raft groups a transaction staged in, not its
// partitions: they are the partitions of those groups that hold open
// batches of the transaction (while it is open, or ended and not yet
// resolved everywhere), as this node's replicas of the groups show them. A
// partition added but not written to yet, and the offsets of
// TxnOffsetCommit, are not listed. An empty id is INVALID_REQUEST, as
// Kafka's coordinator answers it.
func (b *Broker) handleDescribeTransactions(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	tenant := b.tenantOf(c)
	for _, id := range req.TransactionalIDs {
		resp.TransactionStates = append(resp.TransactionStates, b.describeTxn(tenant, id))
	}
	return resp, nil
}

func (b *Broker) describeTxn(tenant wire.ID, id string) kmsg.DescribeTransactionsResponseTransactionState {
	st := kmsg.NewDescribeTransactionsResponseTransactionState()
	st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
	if id == "" {
		// No producer can hold an empty transactional id, so no node
		// coordinates it: Kafka answers INVALID_REQUEST, not NOT_COORDINATOR
		// (which would send a client looking for a coordinator forever).
		st.ErrorCode = kerr.InvalidRequest.Code
		return st
	}
	if st.ErrorCode = b.describingTxns(b.engine.CoordinatorGroup(tenant, 't', id)); st.ErrorCode != 0 {
		return st
	}
	info, ok := b.engine.KafkaTxn(tenant, id)
	if !ok {
		st.ErrorCode = kerr.TransactionalIDNotFound.Code
		return st
	}
	st.State, st.ProducerID, st.ProducerEpoch = txnStateOf(info), info.ProducerID, info.Epoch
	st.TimeoutMillis, st.StartTimestamp = int32(info.TimeoutMs), txnStartMs(info)
	for _, p := range b.engine.KafkaTxnPartitions(info) {
		if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic = p.Topic
			st.Topics = append(st.Topics, t)
		}
		t := &st.Topics[len(st.Topics)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	return st
}
