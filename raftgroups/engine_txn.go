package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Transactions. A transaction whose operations all live in one group
// commits in one raft entry there, as before placement spread partitions.
// One that spans groups commits by two-phase commit (wire/xtxn.go): every
// participant but the coordinator prepares its part; the coordinator's
// decision entry applies its own part and records the outcome; then every
// participant resolves. The coordinator is the lowest group involved.

// txnPart is one group's share of a transaction: its operations, in the
// transaction's order, and where each came from.
type txnPart struct {
	group  int
	prep   []wire.Command // partitions the part's pushes need created first
	cmd    wire.TxnCmd
	ops    []int // transaction op index of each part op
	leases []int // transaction required-lease index of each part lease
	// timerOps maps a part's timer operation to the transaction's: a
	// timers operation spanning queue homes is split.
	timerOps map[int][]int
}

// Transaction commits a transaction's operations together or none of
// them; the result says why not.
func (e *Engine) Transaction(ctx context.Context, c *wire.TxnCmd) (wire.TxnResult, error) {
	parts, fail, err := e.planTxn(ctx, c)
	if err != nil || fail.Code != wire.CodeOK {
		return fail, err
	}
	if len(parts) == 1 {
		p := parts[0]
		cmds := append(p.prep, wire.Command{Kind: wire.KindTransaction, Body: p.cmd.Encode(nil)})
		res, err := e.Propose(ctx, p.group, cmds...)
		if err != nil {
			return wire.TxnResult{}, err
		}
		r, err := wire.DecodeTxnResult(res[len(res)-1])
		if err != nil {
			return wire.TxnResult{}, fmt.Errorf("raftgroups: transaction result: %w", err)
		}
		return assembleTxn(c, parts, map[int]wire.TxnResult{p.group: r}), nil
	}
	return e.commitAcross(ctx, c, parts)
}

// planTxn resolves where each operation goes (creating the queues and
// partitions pushes name) and splits the transaction by group.
func (e *Engine) planTxn(ctx context.Context, c *wire.TxnCmd) ([]*txnPart, wire.TxnResult, error) {
	byGroup := map[int]*txnPart{}
	part := func(g int) *txnPart {
		p := byGroup[g]
		if p == nil {
			p = &txnPart{group: g, cmd: wire.TxnCmd{Tenant: c.Tenant, ID: c.ID}}
			byGroup[g] = p
		}
		return p
	}
	bad := func(op int) ([]*txnPart, wire.TxnResult, error) {
		return nil, wire.TxnFailure(wire.CodeBadRequest, -1, op, -1), nil
	}
	for i, id := range c.RequiredLeases {
		for _, g := range e.requiredLeaseGroups(c, id) {
			if g >= len(e.host.groups) {
				return nil, wire.TxnFailure(wire.CodeLeaseNotFound, i, -1, -1), nil
			}
			p := part(g)
			p.cmd.RequiredLeases = append(p.cmd.RequiredLeases, id)
			p.leases = append(p.leases, i)
		}
	}
	// Pushes first: they create the partitions later positions may name.
	pushes := map[int]wire.PushCmd{}
	var pushIdx []int
	for i, op := range c.Ops {
		if op.Kind != wire.TxnOpPush {
			continue
		}
		pc, err := wire.DecodePushCmd(op.Body)
		if err != nil || pc.Tenant != c.Tenant || pc.Partition == "" {
			return bad(i)
		}
		pushes[i] = pc
		pushIdx = append(pushIdx, i)
	}
	prep := map[int][]wire.Command{}
	if len(pushIdx) > 0 {
		names := map[string][]string{}
		var queues []string
		for _, i := range pushIdx {
			pc := pushes[i]
			if _, ok := names[pc.Queue]; !ok {
				queues = append(queues, pc.Queue)
			}
			if !slices.Contains(names[pc.Queue], pc.Partition) {
				names[pc.Queue] = append(names[pc.Queue], pc.Partition)
			}
		}
		res := make([]*resolved, len(queues))
		errs := make([]error, len(queues))
		fanOut(len(queues), func(k int) {
			ns, task := wire.QueueLabels(queues[k])
			res[k], errs[k] = e.resolve(ctx, allocReq{tenant: c.Tenant, queue: queues[k], names: names[queues[k]],
				create: true, namespace: ns, task: task})
		})
		where := map[string]map[string]wire.DirEntry{}
		inc := map[string]uint64{}
		for k, q := range queues {
			if errs[k] != nil {
				return nil, wire.TxnResult{}, errs[k]
			}
			where[q] = map[string]wire.DirEntry{}
			for _, d := range res[k].parts {
				where[q][d.Name] = d
			}
			inc[q] = res[k].cat.Inc
			for g := range res[k].ensure {
				prep[g] = append(prep[g], res[k].prep(g)...)
			}
		}
		for _, i := range pushIdx {
			pc := pushes[i]
			d := where[pc.Queue][pc.Partition]
			pc.PartitionIndex, pc.Inc = int32(d.Index), inc[pc.Queue]
			pushes[i] = pc
		}
	}
	for i, op := range c.Ops {
		switch op.Kind {
		case wire.TxnOpPush:
			pc := pushes[i]
			d, _ := e.DirByIndex(c.Tenant, pc.Queue, uint32(pc.PartitionIndex))
			pc.Flags |= e.PushFlags()
			if e.QueueEncryptedIn(c.Tenant, pc.Queue, int(d.Group)) {
				if err := e.sealPushRecords(&pc); err != nil {
					return nil, wire.TxnResult{}, err
				}
			}
			p := part(int(d.Group))
			p.cmd.Ops = append(p.cmd.Ops, wire.TxnOp{Kind: op.Kind, Body: pc.Encode(nil)})
			p.ops = append(p.ops, i)
		case wire.TxnOpAck:
			ack, err := wire.DecodeAckCmd(op.Body)
			if err != nil || len(ack.Items) == 0 {
				return bad(i)
			}
			// The front door sends one item per ack operation; items
			// of one operation in different groups would not be one
			// operation's outcome.
			g := wire.GroupOfID(ack.Items[0].PartitionID)
			for _, it := range ack.Items[1:] {
				if wire.GroupOfID(it.PartitionID) != g {
					return bad(i)
				}
			}
			if g >= len(e.host.groups) {
				return nil, wire.TxnFailure(wire.CodePartitionNotFound, -1, i, 0), nil
			}
			sealed, changed, err := e.sealAckErrors(c.Tenant, ack.Items)
			if err != nil {
				return nil, wire.TxnResult{}, err
			}
			if changed {
				ack.Items = sealed
				op.Body = ack.Encode(nil)
			}
			p := part(g)
			p.cmd.Ops = append(p.cmd.Ops, op)
			p.ops = append(p.ops, i)
		case wire.TxnOpPosition:
			pos, err := wire.DecodePositionOp(op.Body)
			if err != nil {
				return bad(i)
			}
			g, ok := e.partitionGroup(ctx, c.Tenant, pos.Queue, pos.Partition, -1)
			if !ok {
				code := wire.CodePartitionNotFound
				if _, exists := e.Catalog(c.Tenant, pos.Queue); !exists {
					code = wire.CodeQueueNotFound
				}
				return nil, wire.TxnFailure(code, -1, i, -1), nil
			}
			p := part(g)
			p.cmd.Ops = append(p.cmd.Ops, op)
			p.ops = append(p.ops, i)
		case wire.TxnOpStreamAck:
			g, sop, code, err := e.planStreamAck(c.Tenant, op)
			if err != nil {
				return nil, wire.TxnResult{}, err
			}
			if code != wire.CodeOK {
				return nil, wire.TxnFailure(code, -1, i, -1), nil
			}
			p := part(g)
			p.cmd.Ops = append(p.cmd.Ops, sop)
			p.ops = append(p.ops, i)
		case wire.TxnOpKV:
			p := part(e.KVGroup(c.Tenant))
			p.cmd.Ops = append(p.cmd.Ops, op)
			p.ops = append(p.ops, i)
		case wire.TxnOpTimers:
			tc, err := wire.DecodeTimersCmd(op.Body)
			if err != nil {
				return bad(i)
			}
			byHome := map[int]*wire.TimersCmd{}
			var homes []int
			idx := map[int][]int{}
			for j, top := range tc.Ops {
				h := e.Home(c.Tenant, top.Queue)
				if byHome[h] == nil {
					byHome[h] = &wire.TimersCmd{Tenant: c.Tenant}
					homes = append(homes, h)
				}
				byHome[h].Ops = append(byHome[h].Ops, top)
				idx[h] = append(idx[h], j)
			}
			for _, h := range homes {
				p := part(h)
				if p.timerOps == nil {
					p.timerOps = map[int][]int{}
				}
				p.timerOps[len(p.cmd.Ops)] = idx[h]
				p.cmd.Ops = append(p.cmd.Ops, wire.TxnOp{Kind: op.Kind, Body: byHome[h].Encode(nil)})
				p.ops = append(p.ops, i)
			}
		default:
			return bad(i)
		}
	}
	for g, cmds := range prep {
		part(g).prep = cmds
	}
	groups := make([]int, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	out := make([]*txnPart, len(groups))
	for i, g := range groups {
		out[i] = byGroup[g]
	}
	return out, wire.TxnResult{Code: wire.CodeOK}, nil
}

// assembleTxn puts the parts' results back in the transaction's order. A
// part that rolled back blames, in the transaction's numbering, what it
// blamed.
func assembleTxn(c *wire.TxnCmd, parts []*txnPart, res map[int]wire.TxnResult) wire.TxnResult {
	for _, p := range parts {
		r, ok := res[p.group]
		if !ok || r.Code == wire.CodeOK {
			continue
		}
		out := wire.TxnFailure(r.Code, -1, -1, r.FailedItem)
		out.Detail = r.Detail
		if r.FailedLease >= 0 && r.FailedLease < len(p.leases) {
			out.FailedLease = p.leases[r.FailedLease]
		}
		if r.FailedOp >= 0 && r.FailedOp < len(p.ops) {
			out.FailedOp = p.ops[r.FailedOp]
			if m := p.timerOps[r.FailedOp]; m != nil && r.FailedItem >= 0 && r.FailedItem < len(m) {
				out.FailedItem = m[r.FailedItem]
			}
		}
		return out
	}
	out := wire.TxnResult{Code: wire.CodeOK, FailedLease: -1, FailedOp: -1, FailedItem: -1, Ops: make([][]byte, len(c.Ops))}
	timers := map[int]*wire.TimersResult{}
	for _, p := range parts {
		r := res[p.group]
		for k, orig := range p.ops {
			if k >= len(r.Ops) {
				continue
			}
			m := p.timerOps[k]
			if m == nil {
				out.Ops[orig] = r.Ops[k]
				continue
			}
			tr, err := wire.DecodeTimersResult(r.Ops[k])
			if err != nil {
				continue
			}
			all := timers[orig]
			if all == nil {
				tc, _ := wire.DecodeTimersCmd(c.Ops[orig].Body)
				all = &wire.TimersResult{Code: wire.CodeOK, Ops: make([]wire.TimerOpResult, len(tc.Ops))}
				timers[orig] = all
			}
			for j, at := range m {
				if j < len(tr.Ops) && at < len(all.Ops) {
					all.Ops[at] = tr.Ops[j]
				}
			}
		}
	}
	for orig, tr := range timers {
		out.Ops[orig] = tr.Encode(nil)
	}
	return out
}

// commitAcross runs two-phase commit over a transaction's parts.
func (e *Engine) commitAcross(ctx context.Context, c *wire.TxnCmd, parts []*txnPart) (wire.TxnResult, error) {
	coord, others := parts[0], parts[1:]
	subs := make([]wire.Command, len(others))
	for i, p := range others {
		subs[i] = wire.Command{Kind: wire.KindTransaction, Body: p.cmd.Encode(nil)}
	}
	own := wire.Command{Kind: wire.KindTransaction, Body: coord.cmd.Encode(nil)}
	out, err := e.twoPhase(ctx, c.ID, coord.group, coord.prep, own, others, subs)
	if err != nil {
		return wire.TxnResult{}, err
	}
	res := map[int]wire.TxnResult{}
	decode := func(b []byte) wire.TxnResult {
		r, err := wire.DecodeTxnResult(b)
		if err != nil {
			return wire.TxnFailure(wire.CodeConflict, -1, -1, -1)
		}
		return r
	}
	if !out.commit {
		// Blame the part that refused, in the transaction's numbering.
		for i, p := range others {
			if out.refused[i] != nil {
				res[p.group] = decode(out.refused[i])
				return assembleTxn(c, []*txnPart{p}, res), nil
			}
		}
		if out.own != nil {
			res[coord.group] = decode(out.own)
			if res[coord.group].Code != wire.CodeOK {
				return assembleTxn(c, []*txnPart{coord}, res), nil
			}
		}
		return wire.TxnFailure(wire.CodeConflict, -1, -1, -1), nil
	}
	res[coord.group] = decode(out.own)
	for i, p := range others {
		if out.results[i] != nil {
			res[p.group] = decode(out.results[i])
		} else {
			res[p.group] = wire.TxnResult{Code: wire.CodeOK}
		}
	}
	return assembleTxn(c, parts, res), nil
}

// twoPhaseOut is how a two-phase commit ended.
type twoPhaseOut struct {
	commit  bool
	own     []byte   // the coordinator's part's result
	refused [][]byte // a participant's refusal, by participant
	results [][]byte // each participant's committed result (nil: not known yet)
}

// prepareDeadline is how long a participant waits for a decision before it
// asks the coordinator, and records an abort there if there is none.
const prepareDeadline = 5 * time.Second

// twoPhase prepares subs[i] in others[i].group, decides at coord with own
// as the coordinator's part, and resolves every participant. An error
// means the outcome is not known to this request (the resolvers will
// settle it the same way everywhere).
func (e *Engine) twoPhase(ctx context.Context, xid wire.ID, coord int, coordPrep []wire.Command, own wire.Command, others []*txnPart, subs []wire.Command) (twoPhaseOut, error) {
	out := twoPhaseOut{refused: make([][]byte, len(others)), results: make([][]byte, len(others))}
	deadline := e.host.clock.NowMs() + prepareDeadline.Milliseconds()
	prepared := make([]bool, len(others))
	errs := make([]error, len(others))
	fanOut(len(others), func(i int) {
		p := others[i]
		cmd := wire.XPrepareCmd{ID: xid, Coord: uint16(coord), DeadlineMs: deadline, Sub: subs[i]}
		res, err := e.Propose(ctx, p.group, append(p.prep, wire.Command{Kind: wire.KindXPrepare, Body: cmd.Encode(nil)})...)
		if err != nil {
			errs[i] = err
			return
		}
		r, err := wire.DecodeXResolveResult(res[len(res)-1])
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("raftgroups: prepare result: %w", err)
		case r.Code == wire.CodeOK:
			prepared[i] = true
		default:
			out.refused[i] = r.Sub
		}
	})
	commit := true
	for i := range others {
		commit = commit && prepared[i]
	}
	if commit {
		e.host.crashAt(FaultAfterPrepare)
	}
	participants := make([]uint16, len(others))
	for i, p := range others {
		participants[i] = uint16(p.group)
	}
	decide := wire.XDecideCmd{ID: xid, Commit: commit, Participants: participants}
	cmds := []wire.Command(nil)
	if commit {
		decide.Own = own
		cmds = append(cmds, coordPrep...)
	}
	cmds = append(cmds, wire.Command{Kind: wire.KindXDecide, Body: decide.Encode(nil)})
	res, err := e.Propose(ctx, coord, cmds...)
	if err != nil {
		if !commit {
			// Nothing committed anywhere: the prepared parts will find
			// no decision and abort.
			return out, errors.Join(append(errs, err)...)
		}
		return out, err
	}
	d, err := wire.DecodeXDecideResult(res[len(res)-1])
	if err != nil {
		return out, fmt.Errorf("raftgroups: decide result: %w", err)
	}
	out.commit, out.own = d.Commit, d.Own
	if d.Commit {
		e.host.crashAt(FaultAfterDecide)
	}
	resolve := wire.XResolveCmd{ID: xid, Commit: d.Commit}
	body := resolve.Encode(nil)
	resolved := make([]bool, len(others))
	// With the fault point set, participants resolve one at a time so the
	// crash comes after exactly one.
	each := fanOut
	if e.host.cfg.CrashAt == FaultAfterResolve {
		each = func(n int, f func(int)) {
			for i := 0; i < n; i++ {
				f(i)
				if d.Commit {
					e.host.crashAt(FaultAfterResolve)
				}
			}
		}
	}
	each(len(others), func(i int) {
		if !d.Commit && out.refused[i] != nil {
			resolved[i] = true // it never prepared
			return
		}
		rs, err := e.Propose(ctx, others[i].group, wire.Command{Kind: wire.KindXResolve, Body: body})
		if err != nil {
			return // its resolver (or the coordinator's finisher) completes it
		}
		if r, err := wire.DecodeXResolveResult(rs[0]); err == nil {
			resolved[i] = true
			if d.Commit {
				out.results[i] = r.Sub
			}
		}
	})
	if d.Commit && !slices.Contains(resolved, false) {
		e.host.forget(coord, xid)
	}
	return out, nil
}
