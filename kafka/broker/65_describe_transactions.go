package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
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
// until the next begins or an InitProducerId makes it Empty again, as
// Kafka's coordinator does (an InitProducerId that aborted an open
// transaction: PrepareAbort until that is resolved). A raft group below
// FormatV8 does not record the InitProducerId: there the state keeps how
// the last transaction ended.
func txnStateOf(info storage.TxnInfo) string {
	switch {
	case info.Ongoing:
		return txnOngoing
	case !info.Unsettled.IsZero() && info.LastCommitted:
		return txnPrepareCommit
	case !info.Unsettled.IsZero():
		return txnPrepareAbort
	case info.TxnSeq == 0 || info.Reinit:
		return txnEmpty
	case info.LastCommitted:
		return txnCompleteCommit
	}
	return txnCompleteAbort
}

// txnStartMs is when a transactional id's current or last transaction
// began (the cluster's clock), -1 when it is Empty (before its first, or
// after an InitProducerId), as Kafka's coordinator answers.
func txnStartMs(info storage.TxnInfo) int64 {
	if info.TxnSeq == 0 || (info.Reinit && !info.Ongoing && info.Unsettled.IsZero()) {
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
// resolved everywhere), as this node's replicas of the groups show them
// once caught up with what those groups committed (catchUpTxnGroups). A
// partition added but not written to yet, and the offsets of
// TxnOffsetCommit, are not listed. An empty id is INVALID_REQUEST, as
// Kafka's coordinator answers it.
func (b *Broker) handleDescribeTransactions(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	tenant := b.tenantOf(c)
	for _, id := range req.TransactionalIDs {
		resp.TransactionStates = append(resp.TransactionStates, b.describeTxn(ctx, tenant, id))
	}
	return resp, nil
}

func (b *Broker) describeTxn(ctx context.Context, tenant wire.ID, id string) kmsg.DescribeTransactionsResponseTransactionState {
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
	if info.Ongoing || !info.Unsettled.IsZero() {
		b.catchUpTxnGroups(ctx, info.Groups)
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

// catchUpTxnGroups makes this node's replicas of the raft groups a
// transaction staged in (bit g of groups) current, within
// raftgroups.CatchUpWait, before its partitions are read from them: a
// batch the producer was answered for through another node is committed
// in its group but may not be applied here yet, and Kafka's coordinator
// lists a partition as soon as the producer added it. Past the wait the
// answer lists what the replicas show.
func (b *Broker) catchUpTxnGroups(ctx context.Context, groups uint64) {
	n := len(b.engine.Stores())
	var gs []int
	for g := 0; g < n && g < 64; g++ {
		if groups&(1<<g) != 0 {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, raftgroups.CatchUpWait)
	defer cancel()
	_ = b.engine.BarrierGroups(ctx, gs) // best effort: the replicas' view is still an answer
}
