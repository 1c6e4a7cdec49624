package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleEndTxn commits a transaction (its staged records and offsets, in
// one raft entry per raft group they live in, atomically: the engine's
// two-phase commit when they span groups) or aborts it (nothing was
// written, so nothing to undo).
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
	err := b.txns.end(cctx, txnKey{tenant, req.TransactionalID}, req.ProducerID, req.ProducerEpoch, req.Commit)
	resp.ErrorCode = coordinatorCode(err)
	return resp, nil
}
