package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
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
	topic string
	first bool // the partition's first batch: its offset is the answer
}

// txnBatches are one partition's batches of a transactional produce.
type txnBatches struct {
	rp        *kmsg.ProduceResponseTopicPartition
	topic     string
	partition int32
	seal      bool
	batches   []records.Batch
}

// handleProduce is a push (spec decision 1): every partition's batches are
// decoded and checked here, on the request's goroutine, then converted to
// stored records in their final command buffers, and each partition's
// commands are proposed to the raft group holding it, one raft entry per
// group. Transactional batches are staged instead on the coordinator of
// the transactional id (txn.go) and written at commit. Proposing and
// staging happen in the order the client sent its requests (Conn.Ordered):
// batches it pipelines to a partition stay in order.
func (b *Broker) handleProduce(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	tenant := b.tenantOf(c)
	var (
		bodies  []raftgroups.KafkaBody
		targets []produceTarget
		staged  []txnBatches
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
			batches, part, err := b.checkProduce(ctx, req, tenant, t.Topic, p)
			switch {
			case err != nil:
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			case req.TransactionID != nil:
				rp.BaseOffset = -1 // offsets are given at commit
				staged = append(staged, txnBatches{rp: rp, topic: t.Topic, partition: p.Partition, seal: seal, batches: batches})
			default:
				for i := range batches {
					body, err := b.produceBody(tenant, t.Topic, p.Partition, part.inc, seal, &batches[i])
					if err != nil {
						rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
						break
					}
					bodies = append(bodies, raftgroups.KafkaBody{Group: part.group, Body: body})
					targets = append(targets, produceTarget{rp: rp, topic: t.Topic, first: i == 0})
				}
			}
		}
	}
	if len(staged) > 0 {
		err := c.Ordered(ctx, func() {
			for _, s := range staged {
				err := b.txns.stage(ctx, tenant, *req.TransactionID, s.topic, s.partition, s.batches, s.seal)
				s.rp.ErrorCode, s.rp.ErrorMessage = errorCode(err), errorMessage(err)
			}
		})
		if err != nil {
			return kafka.ErrorResponse(req, errorCode(err)), nil
		}
	}
	if len(bodies) > 0 {
		b.propose(ctx, c, tenant, req, bodies, targets)
	}
	return resp, nil
}

// checkProduce decides whether a partition may be produced to here (this
// node leads the raft group holding it) and decodes its batches. A topic
// that does not exist is created, with QUEEN_KAFKA_DEFAULT_PARTITIONS
// partitions, when the name is a Kafka topic name, the partition one of
// those, and the batches good.
func (b *Broker) checkProduce(ctx context.Context, req *kmsg.ProduceRequest, tenant wire.ID, topic string,
	p *kmsg.ProduceRequestTopicPartition) ([]records.Batch, cachedPartition, error) {
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return nil, cachedPartition{}, errRequiredAcks
	}
	// The partition cache answers the common case without the stores'
	// locks; a miss asks whether the topic exists at all.
	part, known := b.partition(tenant, topic, p.Partition)
	switch {
	case known && !b.engine.Leads(part.group):
		return nil, cachedPartition{}, errNotLeader
	case known:
	case p.Partition < 0 || p.Partition >= b.cfg.DefaultPartitions:
		return nil, cachedPartition{}, wire.ErrPartitionNotFound
	default:
		if _, exists := b.engine.Catalog(tenant, topic); exists {
			return nil, cachedPartition{}, wire.ErrPartitionNotFound
		}
		if checkTopicName(topic) != nil {
			return nil, cachedPartition{}, wire.ErrQueueNotFound
		}
	}
	batches, err := b.decodeProduced(req, p.Records)
	if err != nil || known {
		return batches, part, err
	}
	if err := b.autoCreate(ctx, tenant, topic, true); err != nil {
		return nil, cachedPartition{}, err
	}
	// Any node may create the topic (a proposal); only the leader of the
	// partition's raft group takes its batches.
	if part, known = b.partition(tenant, topic, p.Partition); !known {
		return nil, cachedPartition{}, wire.ErrPartitionNotFound
	}
	if !b.engine.Leads(part.group) {
		return nil, cachedPartition{}, errNotLeader
	}
	return batches, part, nil
}

// propose queues the produce commands in the client's request order and
// fills each partition's answer from its first batch's result.
func (b *Broker) propose(ctx context.Context, c *kafka.Conn, tenant wire.ID, req *kmsg.ProduceRequest, bodies []raftgroups.KafkaBody, targets []produceTarget) {
	timeout := min(max(time.Duration(req.TimeoutMillis)*time.Millisecond, minProduceWait), maxProduceWait)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		wait    func(context.Context) ([]wire.KafkaProduceResult, error)
		err     error
		results []wire.KafkaProduceResult
	)
	if oerr := c.Ordered(ctx, func() { wait, err = b.engine.KafkaProduce(bodies) }); oerr != nil {
		err = oerr
	}
	if err == nil {
		results, err = wait(pctx)
	}
	for i, tg := range targets {
		if tg.rp.ErrorCode != 0 {
			continue // an earlier batch of the partition failed
		}
		if err != nil {
			tg.rp.ErrorCode, tg.rp.ErrorMessage = errorCode(err), errorMessage(err)
			continue
		}
		switch results[i].Code {
		case wire.CodeQueueNotFound, wire.CodePartitionNotFound:
			// The group holds another incarnation of the topic (it was
			// deleted, maybe created again): the client retries after
			// UNKNOWN_TOPIC_OR_PARTITION, and finds the partition afresh.
			b.forgetPartition(tenant, tg.topic, tg.rp.Partition)
		}
		rerr := results[i].Code.Err()
		if results[i].Code == wire.CodeDuplicate {
			rerr = nil // a retried batch: success, with its original offset
		}
		tg.rp.ErrorCode, tg.rp.ErrorMessage = errorCode(rerr), errorMessage(rerr)
		if tg.first {
			tg.rp.BaseOffset, tg.rp.LogStartOffset = int64(results[i].BaseOffset), int64(results[i].LogStart)
		}
	}
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
// so the records are converted straight into the command. inc is the
// incarnation of the topic the partition was resolved in.
func (b *Broker) produceBody(tenant wire.ID, topic string, partition int32, inc uint64, seal bool, bt *records.Batch) ([]byte, error) {
	cmd := wire.KafkaProduceCmd{ProducerID: wire.NoProducer, StateTTLMs: uint32(b.cfg.DedupWindow.Milliseconds()),
		Push: wire.PushCmd{Tenant: tenant, Queue: topic, PartitionIndex: partition, Inc: inc, Count: len(bt.Records)}}
	if bt.ProducerID >= 0 {
		cmd.ProducerID, cmd.Epoch, cmd.BaseSeq = bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence
	}
	body := cmd.EncodeHeader(make([]byte, 0, 64+len(topic)+storedSize(bt)))
	return b.appendStored(body, bt, seal)
}
