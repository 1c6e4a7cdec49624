package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// handleAddPartitionsToTxn opens the producer's transaction if needed and
// adds the raft groups holding the partitions to the groups it stages in
// (durably, in the transactional id's raft group): the partitions' leaders
// stage its records only in groups it added, and EndTxn resolves each. As
// in Kafka, when one partition cannot be added none is, and the others
// answer OPERATION_NOT_ATTEMPTED.
func (b *Broker) handleAddPartitionsToTxn(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	tenant := b.tenantOf(c)
	if !b.coordinatesTxn(tenant, req.TransactionalID) {
		return kafka.ErrorResponse(req, coordinatorCode(errNotTxnCoordinator)), nil
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var groups uint64
	failed := false
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i] })
		topic, ok := b.engine.KafkaTopic(tenant, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			var d wire.DirEntry
			found := false
			if ok && p >= 0 && int(p) < topic.Partitions {
				d, found = b.engine.DirByIndex(tenant, t.Topic, uint32(p))
			}
			if found {
				groups |= groupBit(int(d.Group))
			} else {
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
	cctx, cancel := context.WithTimeout(ctx, txnWait)
	defer cancel()
	if _, err := b.beginTxn(cctx, tenant, req.TransactionalID, req.ProducerID, req.ProducerEpoch, groups); err != nil {
		return kafka.ErrorResponse(req, coordinatorCode(err)), nil
	}
	return resp, nil
}
