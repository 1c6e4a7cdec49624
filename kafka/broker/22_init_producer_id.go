package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleInitProducerID allocates producer ids from a raft group's
// replicated counter (ids carry the group, so groups never hand out the
// same one). An idempotent producer gets a fresh id each time, from any
// node: a KIP-360 epoch bump (v3+, after OUT_OF_ORDER_SEQUENCE_NUMBER) is
// a new id, which resets its sequences everywhere. A transactional
// producer must ask its id's coordinator (the leader of the raft group the
// id hashes onto): its id keeps its producer id and gets the next epoch,
// fencing the previous holder and ending its open transaction as aborted
// (the engine has its groups write the ABORT markers right away, and
// answers CONCURRENT_TRANSACTIONS until they are written everywhere).
func (b *Broker) handleInitProducerID(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	tenant := b.tenantOf(c)
	cmd := wire.InitProducerCmd{Tenant: tenant, ReqID: newReqID()}
	if req.TransactionalID != nil {
		timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
		switch {
		case *req.TransactionalID == "":
			resp.ErrorCode = coordinatorCode(wire.ErrBadRequest)
			return resp, nil
		case !b.coordinatesTxn(tenant, *req.TransactionalID):
			resp.ErrorCode = coordinatorCode(errNotTxnCoordinator)
			return resp, nil
		case timeout <= 0 || timeout > b.txnMaxTimeout(tenant):
			resp.ErrorCode = coordinatorCode(errTxnTimeout)
			return resp, nil
		}
		if kErr := b.admitTxnID(tenant, *req.TransactionalID); kErr != nil {
			resp.ErrorCode = kErr.Code
			return resp, nil
		}
		cmd.Transactional, cmd.TxnID, cmd.TimeoutMs = true, *req.TransactionalID, uint32(req.TransactionTimeoutMillis)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := b.engine.InitProducer(cctx, &cmd)
	if err == nil {
		err = res.Code.Err()
	}
	if err != nil {
		resp.ErrorCode = coordinatorCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
	return resp, nil
}
