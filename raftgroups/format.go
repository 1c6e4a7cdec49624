package raftgroups

import (
	"context"
	"slices"
	"time"

	"github.com/queen-mq/queen/wire"
)

// The cluster's format gate (wire/format.go), the raft half: each group's
// leader raises the group's active format to the newest that every member
// of the cluster runs a build for, asking each member over the node route
// it already serves (raft/applied, which names the build's newest format;
// a build before the gate names none: FormatV1). A member that does not
// answer holds the raise. QUEEN_FORMAT_AUTO_RAISE=false (Config.HoldFormat)
// holds this node's raises.

// formatEvery is how often a node raises the formats of the groups it
// leads: soon after a cluster starts or its last member is upgraded.
const formatEvery = time.Second

// raiseFormats raises the active format of every group this node leads
// that is below what every member can apply.
func (h *Host) raiseFormats() {
	var low []*group
	for _, g := range h.groups {
		if g.store.ActiveFormat() < h.newestFormat() && h.leads(g) {
			low = append(low, g)
		}
	}
	if len(low) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(h.stopped, h.cfg.RequestTimeout)
	defer cancel()
	target, ok := h.clusterFormat(ctx)
	if !ok {
		return
	}
	for _, g := range low {
		from := g.store.ActiveFormat()
		if from >= target {
			continue
		}
		cmd := wire.SetFormatCmd{Version: target}
		if _, err := g.prop.submit(ctx, []wire.Command{{Kind: wire.KindSetFormat, Body: cmd.Encode(nil)}}); err != nil {
			h.log.Debug("raft: raising a group's format", "group", g.n, "err", err)
			continue
		}
		h.log.Info("raft: group format raised: every member runs a build that knows it", "group", g.n, "from", from, "to", target)
	}
}

// newestFormat is the newest format this node's build applies.
func (h *Host) newestFormat() uint32 { return h.groups[0].store.NewestFormat() }

// clusterFormat is the newest format every member of any group applies,
// and whether every member answered.
func (h *Host) clusterFormat(ctx context.Context) (uint32, bool) {
	var ids []uint64
	for _, g := range h.groups {
		v := g.view.Load()
		for id := range v.voters {
			ids = append(ids, id)
		}
		for id := range v.learners {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	target := h.newestFormat()
	for _, id := range ids {
		if id == h.cfg.NodeID {
			continue
		}
		ans, err := h.peerAnswer(ctx, id)
		if err != nil {
			return 0, false
		}
		target = min(target, max(ans.NewestFormat, wire.FormatV1))
	}
	return target, true
}

// FormatStatus is the format gate as this node sees it: the newest and
// oldest formats its build applies and each group's active format.
type FormatStatus struct {
	Newest uint32   `json:"newest"`
	Oldest uint32   `json:"oldest"`
	Active []uint32 `json:"active"` // by group
}

// Format reports the format gate for /health.
func (h *Host) Format() FormatStatus {
	st := FormatStatus{Newest: h.newestFormat(), Oldest: wire.OldestFormat}
	for _, g := range h.groups {
		st.Active = append(st.Active, g.store.ActiveFormat())
	}
	return st
}

// ActiveFormat is group n's active format on this node's replica.
func (e *Engine) ActiveFormat(n int) uint32 { return e.host.groups[n].store.ActiveFormat() }
