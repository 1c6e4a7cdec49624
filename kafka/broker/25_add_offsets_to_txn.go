package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleAddOffsetsToTxn opens the producer's transaction if needed and lets
// it commit offsets of a consumer group (TxnOffsetCommit), which become the
// group's positions when the transaction commits, atomically with its
// records.
func (b *Broker) handleAddOffsetsToTxn(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tenant := b.tenantOf(c)
	if !b.coordinatesTxn(tenant, req.TransactionalID) {
		resp.ErrorCode = coordinatorCode(errNotTxnCoordinator)
		return resp, nil
	}
	s, err := b.txns.begin(ctx, txnKey{tenant, req.TransactionalID}, req.ProducerID, req.ProducerEpoch)
	if err != nil {
		resp.ErrorCode = coordinatorCode(err)
		return resp, nil
	}
	s.mu.Lock()
	s.groups[req.Group] = true
	s.mu.Unlock()
	return resp, nil
}
