package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleAddPartitionsToTxn opens the producer's transaction if needed and
// adds partitions to it; only added partitions accept its records. As in
// Kafka, when one partition cannot be added none is, and the others answer
// OPERATION_NOT_ATTEMPTED.
func (b *Broker) handleAddPartitionsToTxn(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	tenant := b.tenantOf(c)
	if !b.coordinatesTxn(tenant, req.TransactionalID) {
		return kafka.ErrorResponse(req, coordinatorCode(errNotTxnCoordinator)), nil
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	failed := false
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		topic, ok := b.engine.KafkaTopic(tenant, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			if !ok || p < 0 || int(p) >= topic.Partitions {
				rp.ErrorCode, failed = errorCode(wire.ErrPartitionNotFound), true
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if failed {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode == 0 {
					rp.ErrorCode = kerr.OperationNotAttempted.Code
				}
			}
		}
		return resp, nil
	}
	s, err := b.txns.begin(ctx, txnKey{tenant, req.TransactionalID}, req.ProducerID, req.ProducerEpoch)
	if err != nil {
		return kafka.ErrorResponse(req, coordinatorCode(err)), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partKey{t.Topic, p}
			if s.parts[k] == nil {
				s.parts[k] = &stagedPart{}
				s.order = append(s.order, k)
			}
		}
	}
	return resp, nil
}
