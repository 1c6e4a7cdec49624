package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleAddOffsetsToTxn opens the producer's transaction if needed, so it
// may commit offsets of a consumer group (TxnOffsetCommit, at the group's
// coordinator), which become the group's positions when the transaction
// commits, atomically with its records. The raft groups those offsets are
// staged in are added by TxnOffsetCommit.
func (b *Broker) handleAddOffsetsToTxn(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tenant := b.tenantOf(c)
	if !b.coordinatesTxn(tenant, req.TransactionalID) {
		resp.ErrorCode = coordinatorCode(errNotTxnCoordinator)
		return resp, nil
	}
	cctx, cancel := context.WithTimeout(ctx, txnWait)
	defer cancel()
	_, err := b.beginTxn(cctx, tenant, req.TransactionalID, req.ProducerID, req.ProducerEpoch, 0)
	resp.ErrorCode = coordinatorCode(err)
	return resp, nil
}
