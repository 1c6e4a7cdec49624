package raftgroups

import (
	"context"
	"fmt"
	"time"

	"github.com/queen-mq/queen/wire"
)

// PromoteResult is what a promotion did.
type PromoteResult struct {
	// SourceIndex is, per group, the last source entry the group applied:
	// where it takes writes from.
	SourceIndex []uint64 `json:"sourceIndex"`
	// AbortedTxns counts the Kafka transactions left open by the source
	// that the promotion aborted.
	AbortedTxns int `json:"abortedTxns"`
}

// PromoteStandby ends following in every group (KindLinkPromote through
// each group's log, so every replica stops at the same source entry),
// waits until this node's replica of each group applied it, then aborts
// the Kafka transactions the source left open, as their coordinator's
// timeout would (their producers fenced: a new transaction needs
// InitProducerId again). Leases go on expiring per the replicated clock,
// which from now on the standby's own entries move. Promoting a promoted
// cluster again only aborts what is still open.
func (e *Engine) PromoteStandby(ctx context.Context) (PromoteResult, error) {
	h := e.host
	var out PromoteResult
	if h.standby == nil && h.Standby() == nil {
		return out, ErrNotStandby
	}
	for _, g := range h.groups {
		cmd := wire.LinkPromoteCmd{}
		res, err := g.prop.submit(ctx, []wire.Command{{Kind: wire.KindLinkPromote, Body: cmd.Encode(nil)}})
		if err != nil {
			return out, fmt.Errorf("raftgroups: promoting group %d: %w", g.n, err)
		}
		r, err := wire.DecodeCountResult(res[0])
		if err != nil || r.Code != wire.CodeOK {
			return out, fmt.Errorf("raftgroups: promoting group %d: answered %v %w", g.n, r.Code, err)
		}
		out.SourceIndex = append(out.SourceIndex, r.N)
	}
	for _, g := range h.groups {
		for !g.store.Link().Promoted {
			select {
			case <-ctx.Done():
				return out, fmt.Errorf("%w: group %d promoted, this replica has not applied it yet: %w", ErrOutcomeUnknown, g.n, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	h.log.Info("raft: standby promoted: this cluster takes writes from the last source entry each group applied",
		"sourceIndex", out.SourceIndex)
	for _, g := range h.groups {
		for _, info := range g.store.KafkaOpenTxns() {
			res, err := e.TxnEnd(ctx, &wire.TxnEndCmd{Tenant: info.Tenant, TxnID: info.TxnID, ProducerID: info.ProducerID,
				Epoch: info.Epoch, TxnSeq: info.TxnSeq, BumpEpoch: true})
			if err != nil {
				return out, fmt.Errorf("raftgroups: aborting the source's open transaction %q: %w", info.TxnID, err)
			}
			if res.Code != wire.CodeOK {
				// Ended meanwhile (a client's EndTxn, the reaper): not ours.
				h.log.Info("raft: standby promotion: a transaction of the source was not open any more", "transactional_id", info.TxnID, "code", res.Code)
				continue
			}
			out.AbortedTxns++
		}
	}
	return out, nil
}
