package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// handleTxnOffsetCommit stages consumer-group offsets in the producer's
// open transaction (AddOffsetsToTxn opened it). As in Kafka it is served by
// the consumer group's coordinator, which adds the raft groups holding the
// partitions to the transaction, then stages the offsets in each of them,
// one piece per raft group: they become the group's positions only if the
// transaction commits, atomically with its records, so OffsetFetch never
// sees them early. The group generation (v3) is not checked against the
// group's membership: the producer epoch fences the commit.
func (b *Broker) handleTxnOffsetCommit(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	tenant, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr == nil {
		kErr = b.admitGroup(tenant, coord, req.Group)
	}
	if kErr != nil {
		return kafka.ErrorResponse(req, kErr.Code), nil
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var offs txnOffsets
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i].Partition })
		topic, ok := b.engine.KafkaTopic(tenant, t.Topic)
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			rp.Default()
			rp.Partition = p.Partition
			var d wire.DirEntry
			found := false
			if ok && p.Partition >= 0 && int(p.Partition) < topic.Partitions {
				d, found = b.engine.DirByIndex(tenant, t.Topic, uint32(p.Partition))
			}
			switch {
			case !found:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.Offset < 0:
				rp.ErrorCode = kerr.OffsetOutOfRange.Code // a position is never negative
			case p.Metadata != nil && len(*p.Metadata) > maxOffsetMetadata:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				o := wire.TxnOffset{Group: req.Group, Queue: t.Topic, PartitionIndex: uint32(p.Partition), Offset: uint64(p.Offset)}
				if p.Metadata != nil {
					o.Metadata = *p.Metadata
				}
				offs.add(int(d.Group), o, &rp.ErrorCode)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(offs.slots) == 0 {
		return resp, nil
	}
	cctx, cancel := context.WithTimeout(ctx, txnWait)
	defer cancel()
	stage, err := b.offsetsTxn(cctx, tenant, req, offs.groups)
	if err != nil {
		return kafka.ErrorResponse(req, coordinatorCode(err)), nil
	}
	bodies := make([]raftgroups.KafkaBody, len(offs.order))
	for i, g := range offs.order {
		cmd := stage
		cmd.Produce = wire.KafkaProduceCmd{Push: wire.PushCmd{Tenant: tenant}} // no records: offsets only
		cmd.Offsets = offs.offsets[i]
		bodies[i] = raftgroups.KafkaBody{Group: g, Kind: wire.KindKafkaStage, Body: cmd.Encode(nil)}
	}
	// Pipelined commits of one connection are staged in the order they
	// were sent: an older offset must not land after a newer one.
	var (
		wait    func(context.Context) ([]wire.KafkaProduceResult, error)
		results []wire.KafkaProduceResult
	)
	if oerr := c.Ordered(ctx, func() { wait, err = b.engine.KafkaProduce(bodies) }); oerr != nil {
		return nil, oerr // the connection is closing
	}
	if err == nil {
		results, err = wait(cctx)
	}
	answerPositions(c, "transactional commit", req.Group, offs.slots, err, func(i int) wire.Code { return results[offs.bodyOf[i]].Code })
	return resp, nil
}

// offsetsTxn checks that the producer's transaction is open at its epoch
// and adds groups (bit g) to the raft groups it stages in, returning what
// the pieces staged for it carry.
func (b *Broker) offsetsTxn(ctx context.Context, tenant wire.ID, req *kmsg.TxnOffsetCommitRequest, groups uint64) (wire.KafkaStageCmd, error) {
	info, err := b.openTxn(ctx, tenant, req.TransactionalID, req.ProducerID, req.ProducerEpoch, 0)
	if err != nil {
		return wire.KafkaStageCmd{}, err
	}
	if info.Groups&groups != groups {
		res, err := b.beginTxn(ctx, tenant, req.TransactionalID, req.ProducerID, req.ProducerEpoch, groups)
		switch {
		case err != nil:
			return wire.KafkaStageCmd{}, err
		case res.TxnSeq != info.TxnSeq:
			return wire.KafkaStageCmd{}, errTxnState // it ended meanwhile (and that begin opened the next)
		}
	}
	return b.stageCmd(info), nil
}

// txnOffsets are a TxnOffsetCommit's offsets by the raft group holding
// their partitions: one stage command each.
type txnOffsets struct {
	groups  uint64             // bit g: raft group g
	order   []int              // the raft groups, as first met
	offsets [][]wire.TxnOffset // by order
	slots   []*int16           // each offset's answer
	bodyOf  []int              // each offset's raft group, as an index in order
}

func (o *txnOffsets) add(group int, off wire.TxnOffset, slot *int16) {
	i := slices.Index(o.order, group)
	if i < 0 {
		i = len(o.order)
		o.order = append(o.order, group)
		o.offsets = append(o.offsets, nil)
		o.groups |= groupBit(group)
	}
	o.offsets[i] = append(o.offsets[i], off)
	o.slots = append(o.slots, slot)
	o.bodyOf = append(o.bodyOf, i)
}
