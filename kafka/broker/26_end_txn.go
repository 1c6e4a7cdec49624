package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleEndTxn commits or aborts a transaction: the decision is recorded in
// the transactional id's raft group, then every raft group it wrote to
// marks its partitions' records committed or aborted and applies (commit)
// or drops (abort) its staged offsets, by the engine's two-phase commit. A commit the transaction's groups had already
// turned into an abort (one gave up waiting for the decision) answers
// INVALID_PRODUCER_EPOCH, as a transaction Kafka's coordinator aborted
// does: the client re-initialises and starts over.
func (b *Broker) handleEndTxn(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	tenant := b.tenantOf(c)
	if !b.coordinatesTxn(tenant, req.TransactionalID) {
		resp.ErrorCode = coordinatorCode(errNotTxnCoordinator)
		return resp, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := b.endTxn(cctx, tenant, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	resp.ErrorCode = coordinatorCode(err)
	return resp, nil
}
