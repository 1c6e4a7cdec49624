package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleEndTxn commits a transaction (its staged records and offsets in one
// raft entry) or aborts it (nothing was written, so nothing to undo).
func (b *Broker) handleEndTxn(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	tenant := b.tenantOf(c)
	if !b.leads(tenant) {
		resp.ErrorCode = coordinatorCode(errNotLeader)
		return resp, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := b.txns.end(cctx, txnKey{tenant, req.TransactionalID}, req.ProducerID, req.ProducerEpoch, req.Commit)
	resp.ErrorCode = coordinatorCode(err)
	return resp, nil
}
