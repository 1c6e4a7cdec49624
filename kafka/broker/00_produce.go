package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/wire"
)

// Produce bounds: the longest a produce waits for its commit whatever the
// client's timeout says, and the shortest.
const (
	maxProduceWait = 30 * time.Second
	minProduceWait = time.Second
)

// produceTarget is one produce command in flight and the response partition
// it answers.
type produceTarget struct {
	rp    *kmsg.ProduceResponseTopicPartition
	first bool // the partition's first batch: its offset is the answer
}

// handleProduce is a push (spec decision 1): every partition's batches are
// decoded and checked here, on the request's goroutine, then converted to
// stored records in their final command buffers, and all of the request's
// partitions are proposed together as one raft entry. Transactional batches
// are staged on the coordinator instead (txn.go) and written at commit.
func (b *Broker) handleProduce(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	tenant := b.tenantOf(c)
	store := b.engine.Store(tenant)
	leads := b.leads(tenant)
	var (
		bodies  [][]byte
		targets []produceTarget
	)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		seal := b.engine.QueueEncrypted(tenant, t.Topic)
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			// The partition cache answers the common case without the
			// store's lock; a miss asks whether the topic exists at all.
			_, known := b.partition(tenant, t.Topic, p.Partition)
			exists := known
			if !known {
				_, exists = store.KafkaTopic(tenant, t.Topic)
			}
			var err error
			switch {
			case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
				rp.ErrorCode = kerr.InvalidRequiredAcks.Code
				continue
			case !leads:
				err = errNotLeader
			case known:
			case !exists && checkTopicName(t.Topic) != nil:
				err = wire.ErrQueueNotFound
			case p.Partition < 0 || exists || p.Partition >= b.cfg.DefaultPartitions:
				err = wire.ErrPartitionNotFound
			}
			var batches []records.Batch
			if err == nil {
				batches, err = b.decodeProduced(req, p.Records)
			}
			if err == nil && req.TransactionID != nil {
				err = b.txns.stage(ctx, tenant, *req.TransactionID, t.Topic, p.Partition, batches, seal)
				rp.BaseOffset = -1 // offsets are given at commit
			}
			if err != nil || req.TransactionID != nil {
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
				continue
			}
			for i := range batches {
				body, err := b.produceBody(tenant, t.Topic, p.Partition, !exists, seal, &batches[i])
				if err != nil {
					rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
					break
				}
				bodies = append(bodies, body)
				targets = append(targets, produceTarget{rp: rp, first: i == 0})
			}
		}
	}
	if len(bodies) == 0 {
		return resp, nil
	}
	timeout := min(max(time.Duration(req.TimeoutMillis)*time.Millisecond, minProduceWait), maxProduceWait)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Queued in the order the client sent its requests, so batches it
	// pipelines to a partition are appended in order; applied concurrently.
	var (
		wait    func(context.Context) ([]wire.KafkaProduceResult, error)
		err     error
		results []wire.KafkaProduceResult
	)
	if oerr := c.Ordered(ctx, func() { wait, err = b.engine.KafkaProduce(tenant, bodies) }); oerr != nil {
		err = oerr
	}
	if err == nil {
		results, err = wait(pctx)
	}
	for i, tg := range targets {
		if tg.rp.ErrorCode != 0 {
			continue // an earlier batch of the partition failed
		}
		if err == nil {
			err := results[i].Code.Err()
			if results[i].Code == wire.CodeDuplicate {
				err = nil
			}
			tg.rp.ErrorCode, tg.rp.ErrorMessage = errorCode(err), errorMessage(err)
			if tg.first {
				tg.rp.BaseOffset, tg.rp.LogStartOffset = int64(results[i].BaseOffset), int64(results[i].LogStart)
			}
			continue
		}
		tg.rp.ErrorCode, tg.rp.ErrorMessage = errorCode(err), errorMessage(err)
	}
	return resp, nil
}

// decodeProduced decodes one partition's record batches and refuses what a
// produce may not carry: control batches (only a coordinator writes them),
// empty batches, and transactional batches outside a transactional produce
// (or the reverse).
func (b *Broker) decodeProduced(req *kmsg.ProduceRequest, data []byte) ([]records.Batch, error) {
	batches, err := records.Decode(data, records.Limits{MaxBatchBytes: b.cfg.MaxMessageBytes})
	if err != nil {
		return nil, err
	}
	for i := range batches {
		bt := &batches[i]
		switch {
		case bt.IsControl():
			return nil, fmt.Errorf("%w: a control batch", errBadBatch)
		case len(bt.Records) == 0:
			return nil, fmt.Errorf("%w: an empty batch", records.ErrCorrupt)
		case bt.IsTransactional() != (req.TransactionID != nil):
			return nil, fmt.Errorf("%w: transactional flag and request disagree", errBadBatch)
		case bt.ProducerID >= 0 && bt.BaseSequence < 0:
			return nil, fmt.Errorf("%w: a producer id without a sequence", errBadBatch)
		}
	}
	return batches, nil
}

// produceBody builds one batch's KafkaProduceCmd in a buffer sized for it,
// so the records are converted straight into the command.
func (b *Broker) produceBody(tenant wire.ID, topic string, partition int32, create, seal bool, bt *records.Batch) ([]byte, error) {
	cmd := wire.KafkaProduceCmd{ProducerID: wire.NoProducer, StateTTLMs: uint32(b.cfg.DedupWindow.Milliseconds()),
		Push: wire.PushCmd{Tenant: tenant, Queue: topic, PartitionIndex: partition, Flags: wire.PushFromKafka,
			Count: len(bt.Records)}}
	if bt.ProducerID >= 0 {
		cmd.ProducerID, cmd.Epoch, cmd.BaseSeq = bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence
	}
	if create {
		cmd.Push.Flags |= wire.PushCreateQueue
		cmd.Push.NewPartitions = uint32(b.cfg.DefaultPartitions)
	}
	body := cmd.EncodeHeader(make([]byte, 0, 64+len(topic)+storedSize(bt)))
	return b.appendStored(body, bt, seal)
}
