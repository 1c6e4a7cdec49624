package broker

import (
	"context"
	"errors"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Transactions (spec §3.3, docs/placement.md "Transactions across groups").
// No node holds any of a transaction in memory:
//
//   - its state (producer id, epoch, whether open, the raft groups it stages
//     in) lives in the raft group its transactional id hashes onto, whose
//     leader is its coordinator (InitProducerId, AddPartitionsToTxn,
//     AddOffsetsToTxn, EndTxn, and the timeout reaper);
//   - its records are appended by each partition's leader (transactional
//     Produce) with their real offsets, held back from read_committed and
//     HTTP readers by the partition's last stable offset, and its offsets
//     staged by the consumer group's coordinator (TxnOffsetCommit), in the
//     raft group holding the partition: that group's prepared part of the
//     transaction's two-phase commit;
//   - EndTxn records the decision in the coordinator's group and resolves
//     every group the state names: each partition written gets a COMMIT or
//     ABORT marker (an abort's records stay, listed as aborted), and a
//     commit sets the staged positions.
//
// So a transaction survives the loss of any node, its coordinator's
// included: whichever node leads a group next carries on from the
// replicated state.

// txnWait bounds a transaction API's raft writes.
const txnWait = 15 * time.Second

// coordinatesTxn reports whether this node coordinates a transactional id
// of tenant: it leads the raft group the id hashes onto.
func (b *Broker) coordinatesTxn(tenant wire.ID, id string) bool {
	node, _, ok := b.engine.TxnCoordinator(tenant, id)
	return ok && node == uint64(b.cfg.NodeID)
}

// openTxn returns a producer's transaction as the transactional id's raft
// group records it, checked open at the producer's epoch with every raft
// group of groups (bit g) added. When this node's replica does not show
// that, it is read again after a read barrier: the request may follow a
// write made through another node (AddPartitionsToTxn at the coordinator,
// then a produce at a partition's leader).
func (b *Broker) openTxn(ctx context.Context, tenant wire.ID, txnID string, producerID int64, epoch int16, groups uint64) (storage.TxnInfo, error) {
	info, ok := b.engine.KafkaTxn(tenant, txnID)
	if checkTxn(info, ok, producerID, epoch, groups) != nil {
		if err := b.engine.Barrier(ctx, b.engine.CoordinatorGroup(tenant, 't', txnID)); err != nil {
			return info, err
		}
		info, ok = b.engine.KafkaTxn(tenant, txnID)
	}
	return info, checkTxn(info, ok, producerID, epoch, groups)
}

// checkTxn checks a transactional id's state (ok: it has one) against the
// producer id and epoch a request names and the raft groups it needs.
func checkTxn(info storage.TxnInfo, ok bool, producerID int64, epoch int16, groups uint64) error {
	switch {
	case !ok || info.ProducerID != producerID:
		return wire.ErrNotFound
	case info.Epoch != epoch:
		return wire.ErrFenced
	case !info.Ongoing:
		return errTxnState
	case info.Groups&groups != groups:
		return errTxnNotAdded
	}
	return nil
}

// beginTxn opens a producer's transaction, if it is not open, and adds
// groups (bit g) to the raft groups it stages in, which EndTxn resolves.
func (b *Broker) beginTxn(ctx context.Context, tenant wire.ID, txnID string, producerID int64, epoch int16, groups uint64) (wire.KafkaTxnResult, error) {
	res, err := b.engine.TxnBegin(ctx, &wire.TxnBeginCmd{Tenant: tenant, TxnID: txnID, ProducerID: producerID, Epoch: epoch, Groups: groups})
	if err == nil {
		err = res.Code.Err()
	}
	return res, err
}

// stageCmd is what every piece staged for the transaction info describes
// carries: its commit's id, its coordinator's raft group and the deadline
// after which an undecided piece asks that group for the decision.
func (b *Broker) stageCmd(info storage.TxnInfo) wire.KafkaStageCmd {
	return wire.KafkaStageCmd{XID: storage.KafkaTxnXID(info), Coord: uint16(b.engine.CoordinatorGroup(info.Tenant, 't', info.TxnID)),
		DeadlineMs: raftgroups.KafkaStageDeadline(info), TxnID: info.TxnID}
}

// groupBit is raft group g in a transaction's groups.
func groupBit(g int) uint64 { return 1 << uint(g) }

// endTxn commits or aborts a producer's transaction. An end repeated after
// it completed goes to the engine too, which answers as the first did and
// resolves again every group the first may not have reached.
func (b *Broker) endTxn(ctx context.Context, tenant wire.ID, txnID string, producerID int64, epoch int16, commit bool) error {
	info, err := b.openTxn(ctx, tenant, txnID, producerID, epoch, 0)
	repeated := errors.Is(err, errTxnState) && info.TxnSeq > 0 && info.LastCommitted == commit
	if err != nil && !repeated {
		return err
	}
	res, err := b.engine.TxnEnd(ctx, &wire.TxnEndCmd{Tenant: tenant, TxnID: txnID, ProducerID: producerID, Epoch: epoch,
		TxnSeq: info.TxnSeq, Commit: commit})
	switch {
	case err != nil:
		return err
	case res.Code == wire.CodeConflict && commit:
		return errTxnAborted
	}
	return res.Code.Err()
}

// reapEvery is how often the coordinator looks for transactions past their
// timeout.
const reapEvery = time.Second

// reapTxns aborts transactions past their timeout until the broker closes.
func (b *Broker) reapTxns() {
	defer b.wg.Done()
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.reapNow()
	}
}

// reapNow reaps at the cluster's clock, the one BeganMs was stamped with:
// a node whose wall clock is off must neither abort a transaction that just
// began nor leave one open past its timeout.
func (b *Broker) reapNow() { b.reapTxnsOnce(b.engine.NowMs()) }

// reapTxnsOnce aborts the open transactions this node coordinates that are
// past their timeout at nowMs, and fences their producers, as Kafka's
// coordinator does. nowMs is the cluster's clock, the one BeganMs was
// stamped with, not this node's wall clock. An abort that fails is tried
// again at the next tick while the transaction is open; once it is ended,
// the engine's finisher resolves what is left in its groups.
func (b *Broker) reapTxnsOnce(nowMs int64) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	for _, info := range b.engine.LedOpenTxns() {
		timeout := time.Duration(info.TimeoutMs) * time.Millisecond
		if nowMs < info.BeganMs+int64(info.TimeoutMs) {
			continue
		}
		b.log.Info("kafka: aborting a transaction past its timeout", "transactional_id", info.TxnID, "timeout", timeout)
		_, err := b.engine.TxnEnd(ctx, &wire.TxnEndCmd{Tenant: info.Tenant, TxnID: info.TxnID, ProducerID: info.ProducerID,
			Epoch: info.Epoch, TxnSeq: info.TxnSeq, BumpEpoch: true})
		if err != nil {
			b.log.Warn("kafka: aborting a transaction past its timeout failed; the next tick or the engine's finisher goes on", "transactional_id", info.TxnID, "err", err)
		}
	}
}
