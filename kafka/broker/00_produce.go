package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
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
	// appendTime: the topic's records carry their append time, which the
	// answer reports (message.timestamp.type=LogAppendTime).
	appendTime bool
}

// txnBatches are one partition's batches of a transactional produce.
type txnBatches struct {
	rp        *kmsg.ProduceResponseTopicPartition
	topic     string
	partition int32
	part      cachedPartition
	stored    storedForm
	batches   []records.Batch
}

// handleProduce is a push (spec decision 1): every partition's batches are
// decoded and checked here, on the request's goroutine, then put in their
// final command buffers (kept as produced, or converted to stored records),
// and each partition's commands are proposed to the raft group holding it,
// one raft entry per group. Transactional batches are appended the same
// way, as pieces of the producer's open transaction (txn.go): their
// partitions' last stable offset holds readers back until it ends.
// Proposals happen in the order the client sent its requests
// (Conn.Ordered): batches it pipelines to a partition stay in order.
func (b *Broker) handleProduce(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	tenant := b.tenantOf(c)
	gate := producePolicy(ctx)
	if gate.Refuse != nil {
		refuseAllProduce(resp, req, gate.Refuse)
		return resp, nil
	}
	create := mayCreateTopics(c)
	var (
		bodies  []raftgroups.KafkaBody
		targets []produceTarget
		staged  []txnBatches
	)
	// One decompression budget for the whole request: bounding each
	// partition alone would let a small request of many compressed batches
	// inflate to many times the bound, all held until committed.
	inflate := records.NewBudget(b.cfg.MaxDecompressedBytes)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i].Partition })
		set, known := b.engine.TopicSettings(tenant, t.Topic)
		// With ACLs, creating needs Kafka's CREATE (acl_enforce.go),
		// asked only of a topic not there.
		createT := create && (known || b.aclMayCreate(c, t.Topic))
		maxBytes := b.maxBatchBytes(set)
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			batches, part, err := b.checkProduce(ctx, req, tenant, t.Topic, p, maxBytes, inflate, createT)
			if err == nil {
				err = gate.check(batches)
			}
			if err == nil && set.Compact && !allKeyed(batches) {
				// As Kafka: compaction keeps the last record per key, and
				// a record without one has none.
				err = fmt.Errorf("%w: a compacted topic takes only records with a key", errBadBatch)
			}
			// The group the batch goes to is the one whose copy of the
			// options the state machine checks (CodeSealRequired).
			form := storedForm{seal: err == nil && b.engine.QueueEncryptedIn(tenant, t.Topic, part.group),
				appendTime: set.LogAppendTime}
			switch {
			case err != nil:
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			case req.TransactionID != nil:
				staged = append(staged, txnBatches{rp: rp, topic: t.Topic, partition: p.Partition, part: part, stored: form, batches: batches})
			default:
				for i := range batches {
					body, err := b.produceBody(tenant, t.Topic, p.Partition, part.inc, form, &batches[i])
					if err != nil {
						rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
						break
					}
					body.Group = part.group
					bodies = append(bodies, body)
					targets = append(targets, produceTarget{rp: rp, topic: t.Topic, first: i == 0, appendTime: set.LogAppendTime})
				}
			}
		}
	}
	if len(staged) > 0 {
		bodies, targets = b.stageBatches(ctx, tenant, req, staged)
	}
	if len(bodies) > 0 {
		b.propose(ctx, c, tenant, req, bodies, targets)
	}
	if req.Version >= 10 {
		b.hintLeaders(tenant, resp)
	}
	return resp, nil
}

// hintLeaders names, for each partition answered NOT_LEADER_OR_FOLLOWER,
// the node that leads it now and at which epoch, with that node's address
// (KIP-951, produce v10). A client moves the partition there at once
// instead of waiting for its next metadata refresh, which franz-go spaces
// at least 5 s apart: the pause a leader change (a rolling restart's
// hand-off) costs a producer shrinks from seconds to a round trip.
func (b *Broker) hintLeaders(tenant wire.ID, resp *kmsg.ProduceResponse) {
	named := map[int32]bool{}
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			if rp.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			part, known := b.partition(tenant, rt.Topic, rp.Partition)
			if !known {
				continue
			}
			id, term, ok := b.groupLeader(part.group)
			if !ok || id == int32(b.cfg.NodeID) {
				continue
			}
			host, port, ok := b.brokerAddr(uint64(id))
			if !ok {
				continue
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epochOf(term+uint64(part.epochBase))
			if !named[id] {
				named[id] = true
				resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: id, Host: host, Port: port})
			}
		}
	}
}

// allKeyed reports whether every record of batches has a key.
func allKeyed(batches []records.Batch) bool {
	for i := range batches {
		for j := range batches[i].Records {
			if batches[i].Records[j].Key == nil {
				return false
			}
		}
	}
	return true
}

// answerEveryPartition answers every partition of req with code and msg,
// nothing written (base offset -1).
func answerEveryPartition(resp *kmsg.ProduceResponse, req *kmsg.ProduceRequest, code int16, msg *string) {
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage, rp.BaseOffset = p.Partition, code, msg, -1
			rt.Partitions[pi] = rp
		}
	}
}

// maxBatchBytes is the largest batch a topic takes: its max.message.bytes
// when set, which may exceed the broker's message.max.bytes as in Kafka
// (the request frame, the decompression budget and the raft entry bound
// still apply), else the broker's.
func (b *Broker) maxBatchBytes(set wire.TopicSettings) int {
	if set.MaxMessageBytes > 0 {
		return set.MaxMessageBytes
	}
	return b.cfg.MaxMessageBytes
}

// checkProduce decides whether a partition may be produced to here (this
// node leads the raft group holding it) and decodes its batches (each at
// most maxBytes), drawing on the request's decompression budget. A topic
// that does not exist is created, with QUEEN_KAFKA_DEFAULT_PARTITIONS
// partitions, when the producer may create topics (create), the name is a
// Kafka topic name, the partition one of those, and the batches good.
func (b *Broker) checkProduce(ctx context.Context, req *kmsg.ProduceRequest, tenant wire.ID, topic string,
	p *kmsg.ProduceRequestTopicPartition, maxBytes int, inflate *records.Budget, create bool) ([]records.Batch, cachedPartition, error) {
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return nil, cachedPartition{}, errRequiredAcks
	}
	// The partition cache answers the common case without the stores'
	// locks; a miss asks whether the topic exists at all.
	part, known := b.partition(tenant, topic, p.Partition)
	switch {
	case isInternalTopic(topic):
		return nil, cachedPartition{}, errInternalTopic // as Kafka refuses clients; an HTTP queue of the name is hidden
	case known && !b.engine.Leads(part.group):
		return nil, cachedPartition{}, errNotLeader
	case known:
	case p.Partition < 0 || p.Partition >= b.cfg.DefaultPartitions:
		return nil, cachedPartition{}, wire.ErrPartitionNotFound
	default:
		if _, exists := b.engine.Catalog(tenant, topic); exists {
			return nil, cachedPartition{}, wire.ErrPartitionNotFound
		}
		if !create || checkTopicName(topic) != nil {
			return nil, cachedPartition{}, wire.ErrQueueNotFound
		}
	}
	batches, err := b.decodeProduced(req, p.Records, maxBytes, inflate)
	if err != nil || known {
		return batches, part, err
	}
	if err := b.autoCreate(ctx, tenant, topic, true, 0); err != nil {
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
	pctx, cancel := context.WithTimeout(ctx, produceWait(req))
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
		case wire.CodeQueueNotFound, wire.CodePartitionNotFound, wire.CodePartitionMoved:
			// The group holds another incarnation of the topic (it was
			// deleted, maybe created again), or the partition is moving
			// to another group: the client retries after
			// UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER, and
			// finds the partition afresh.
			b.forgetPartition(tenant, tg.topic, tg.rp.Partition)
		}
		rerr := results[i].Code.Err()
		if results[i].Code == wire.CodeDuplicate {
			rerr = nil // a retried batch: success, with its original offset
		}
		tg.rp.ErrorCode, tg.rp.ErrorMessage = errorCode(rerr), errorMessage(rerr)
		switch {
		case rerr == nil && tg.first:
			tg.rp.BaseOffset, tg.rp.LogStartOffset = int64(results[i].BaseOffset), int64(results[i].LogStart)
			if tg.appendTime && results[i].AppendMs > 0 {
				tg.rp.LogAppendTime = results[i].AppendMs
			}
		case rerr != nil:
			tg.rp.BaseOffset = -1
			if results[i].Code == wire.CodeUnknownProducer {
				// KIP-360: a log start past the producer's last
				// acknowledged offset tells the client its state was
				// dropped with its records, not that records were lost.
				tg.rp.LogStartOffset = int64(results[i].LogStart)
			}
		}
	}
}

// decodeProduced decodes one partition's record batches and refuses what a
// produce may not carry: control batches (only a coordinator writes them),
// empty batches, and transactional batches outside a transactional produce
// (or the reverse).
func (b *Broker) decodeProduced(req *kmsg.ProduceRequest, data []byte, maxBytes int, inflate *records.Budget) ([]records.Batch, error) {
	batches, err := records.Decode(data, records.Limits{MaxBatchBytes: maxBytes, Budget: inflate})
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

// produceWait is how long a produce waits for its commit.
func produceWait(req *kmsg.ProduceRequest) time.Duration {
	return min(max(time.Duration(req.TimeoutMillis)*time.Millisecond, minProduceWait), maxProduceWait)
}

// produceCmd is one batch's KafkaProduceCmd, without its records. inc is
// the incarnation of the topic the partition was resolved in.
func (b *Broker) produceCmd(tenant wire.ID, topic string, partition int32, inc uint64, bt *records.Batch) wire.KafkaProduceCmd {
	cmd := wire.KafkaProduceCmd{ProducerID: wire.NoProducer, StateTTLMs: uint32(b.cfg.DedupWindow.Milliseconds()),
		Push: wire.PushCmd{Tenant: tenant, Queue: topic, PartitionIndex: partition, Inc: inc, Count: len(bt.Records),
			Flags: b.engine.PushFlags()}}
	if bt.ProducerID >= 0 {
		cmd.ProducerID, cmd.Epoch, cmd.BaseSeq = bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence
	}
	return cmd
}

// produceBody builds one batch's KafkaProduceCmd (its Group left for the
// caller).
func (b *Broker) produceBody(tenant wire.ID, topic string, partition int32, inc uint64, form storedForm, bt *records.Batch) (raftgroups.KafkaBody, error) {
	cmd := b.produceCmd(tenant, topic, partition, inc, bt)
	return b.batchBody(&cmd.Push, form, bt, 64+len(topic), cmd.EncodeHeader)
}

// batchBody builds a command carrying one batch (push: the command's push
// part, header: its encoder, of at most headerSize bytes). A batch whose
// records carry their producer's time, for a topic that is not encrypted,
// is kept as produced (wire.PushKafkaBatch): fetch serves its bytes as they
// came, and the command's tail is those bytes where the connection read
// them, copied only into the raft entry. Otherwise its records are
// converted straight into the command, sealed when the topic is encrypted.
func (b *Broker) batchBody(push *wire.PushCmd, form storedForm, bt *records.Batch, headerSize int, header func([]byte) []byte) (raftgroups.KafkaBody, error) {
	if form.seal || form.appendTime || bt.TimestampType() != records.CreateTime {
		body, err := b.appendStored(header(make([]byte, 0, headerSize+storedSize(bt))), bt, form)
		return raftgroups.KafkaBody{Body: body}, err
	}
	push.Flags |= wire.PushKafkaBatch
	body := header(make([]byte, 0, headerSize+wire.KafkaBatchHeaderSize))
	body = wire.AppendKafkaBatchHeader(body, b.ids.first(len(bt.Records)), bt.InflatedSize)
	return raftgroups.KafkaBody{Body: body, Tail: bt.Raw}, nil
}

// stageBatches builds the commands of a transactional produce: each batch,
// checked as a produce is, appended as a piece of the producer's open
// transaction in the raft group holding its partition, which the
// transaction must have added (AddPartitionsToTxn). Partitions that cannot
// stage get their error in their answer.
func (b *Broker) stageBatches(ctx context.Context, tenant wire.ID, req *kmsg.ProduceRequest, parts []txnBatches) ([]raftgroups.KafkaBody, []produceTarget) {
	var groups uint64
	for _, p := range parts {
		groups |= groupBit(p.part.group)
	}
	octx, cancel := context.WithTimeout(ctx, produceWait(req))
	defer cancel()
	first := &parts[0].batches[0]
	info, err := b.openTxn(octx, tenant, *req.TransactionID, first.ProducerID, first.ProducerEpoch, groups)
	if errors.Is(err, errTxnNotAdded) {
		err = nil // some partitions were added: answered one by one
	}
	stage := b.stageCmd(info)
	var (
		bodies  []raftgroups.KafkaBody
		targets []produceTarget
	)
	for _, p := range parts {
		pieces, perr := b.stagePartition(stage, info, err, tenant, &p)
		if perr != nil {
			p.rp.ErrorCode, p.rp.ErrorMessage = errorCode(perr), errorMessage(perr)
			continue
		}
		for i, body := range pieces {
			body.Group, body.Kind = p.part.group, wire.KindKafkaStage
			bodies = append(bodies, body)
			targets = append(targets, produceTarget{rp: p.rp, topic: p.topic, first: i == 0})
		}
	}
	return bodies, targets
}

// stagePartition builds the stage commands of one partition's batches
// (err: the transaction's check failed), each in a buffer sized for it.
func (b *Broker) stagePartition(stage wire.KafkaStageCmd, info storage.TxnInfo, err error, tenant wire.ID, p *txnBatches) ([]raftgroups.KafkaBody, error) {
	if err != nil {
		return nil, err
	}
	if info.Groups&groupBit(p.part.group) == 0 {
		return nil, errTxnNotAdded
	}
	pieces := make([]raftgroups.KafkaBody, len(p.batches))
	for i := range p.batches {
		bt := &p.batches[i]
		if err := checkTxn(info, true, bt.ProducerID, bt.ProducerEpoch, 0); err != nil {
			return nil, err
		}
		stage.Produce = b.produceCmd(tenant, p.topic, p.partition, p.part.inc, bt)
		if pieces[i], err = b.batchBody(&stage.Produce.Push, p.stored, bt, 128+len(p.topic)+len(stage.TxnID), stage.EncodeHeader); err != nil {
			return nil, err
		}
	}
	return pieces, nil
}
