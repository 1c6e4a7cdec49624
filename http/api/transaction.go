package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

type txnRequest struct {
	Operations     []txnOperation   `json:"operations"`
	RequiredLeases []string         `json:"requiredLeases"`
	Positions      []txnPosition    `json:"positions"`
	KV             []kvOpRequest    `json:"kv"`
	Timers         []timerOpRequest `json:"timers"`
}

// txnOperation is one of "operations": an ack (the fields of an
// acknowledgment) or a push (items, as in POST /api/v1/push).
type txnOperation struct {
	Type string `json:"type"`
	ackItem
	Items []pushItem `json:"items"`
}

type txnPosition struct {
	Queue            string          `json:"queue"`
	ConsumerGroup    string          `json:"consumerGroup"`
	Partition        string          `json:"partition"`
	Offset           json.RawMessage `json:"offset"`
	Metadata         string          `json:"metadata"`
	SubscriptionMode string          `json:"subscriptionMode"`
}

type txnAnswer struct {
	TransactionID string      `json:"transactionId"`
	Success       bool        `json:"success"`
	Results       []txnResult `json:"results,omitempty"`
	Reason        string      `json:"reason,omitempty"`
	Error         string      `json:"error,omitempty"`
	FailedIndex   *int        `json:"failedIndex,omitempty"`
	FailedType    string      `json:"failedType,omitempty"`
	KVReason      string      `json:"kvReason,omitempty"`
}

// txnResult is one operation's (or position's) outcome.
type txnResult struct {
	Index   int          `json:"index"`
	Type    string       `json:"type"`
	Success bool         `json:"success"`
	Items   []pushAnswer `json:"items,omitempty"`
	*ackAnswer
	Queue         string  `json:"queue,omitempty"`
	Partition     string  `json:"partition,omitempty"`
	ConsumerGroup string  `json:"consumerGroup,omitempty"`
	Offset        *uint64 `json:"offset,omitempty"`
	// kv and timers: their per-operation results.
	KV     []kvOpAnswer     `json:"kv,omitempty"`
	Timers []map[string]any `json:"timers,omitempty"`
}

// Limits of one transaction (spec §2.8).
const (
	maxTxnPositions  = 16384
	maxTxnOperations = 16384
	maxTxnKVOps      = 64
	maxTxnKVKeys     = 256
)

// txnPlan maps the request onto the command: which wire operations each
// request operation became, and what its results are rendered from.
type txnPlan struct {
	cmd       wire.TxnCmd
	kinds     []string // per wire op: "push", "ack", "position", "kv", "timers"
	requests  []int    // per wire op: index in operations, or in positions
	pushes    map[int]pushPlan
	positions []wire.PositionOp
}

type pushPlan struct {
	first  int // first wire op of the push
	placed []itemPlace
	ids    []wire.ID
}

// transaction is POST /api/v1/transaction (spec §2.8): pushes, acks,
// position writes, KV and timers commit together, or nothing changes (in
// one raft entry when they live in one group, by two-phase commit across
// groups otherwise).
// Both outcomes are answered 200; a rollback carries the reason and which
// operation failed. Only a body that is not JSON is a 400, and only an
// unknown outcome (no leader, timeout) the error envelope.
func (s *Server) transaction(ctx *fasthttp.RequestCtx) error {
	var req txnRequest
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	if err := s.aclTxn(ctx, tenant, &req); err != nil {
		return err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	ans := txnAnswer{TransactionID: id.String()}
	fail := func(f *txnFault) error {
		ans.Reason, _ = txnReason(f.err)
		ans.Error, ans.FailedType, ans.KVReason = f.err.Error(), f.kind, f.detail
		if f.index >= 0 {
			ans.FailedIndex = &f.index
		}
		writeJSON(ctx, http.StatusOK, ans)
		return nil
	}
	plan, fault := s.planTxn(ctx, tenant, producerSub(ctx), &req)
	if fault != nil {
		return fail(fault)
	}
	plan.cmd.ID = wire.ID(id)
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Transaction(rctx, &plan.cmd)
	if err != nil {
		if _, rollback := txnReason(err); rollback {
			return fail(&txnFault{err, "", -1, ""})
		}
		return err
	}
	if res.Code != wire.CodeOK {
		return fail(plan.failure(&req, res))
	}
	ans.Success = true
	if ans.Results, err = plan.results(&req, res); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// txnFault is why a transaction is rolled back: the error, and the kind
// and index of the part it blames ("" and -1 for the whole request).
type txnFault struct {
	err    error
	kind   string
	index  int
	detail string // kv: the failed operation's reason
}

// planTxn validates the request and builds the command.
func (s *Server) planTxn(ctx context.Context, tenant wire.ID, sub string, req *txnRequest) (*txnPlan, *txnFault) {
	if len(req.Operations) == 0 && len(req.Positions) == 0 && len(req.KV) == 0 && len(req.Timers) == 0 {
		return nil, &txnFault{badRequest("operations must be a non-empty array"), "", -1, ""}
	}
	if len(req.Operations) > maxTxnOperations || len(req.Positions) > maxTxnPositions || len(req.RequiredLeases) > wire.MaxTxnLeases {
		return nil, &txnFault{badRequest("too many operations, positions or required leases"), "", -1, ""}
	}
	plan := &txnPlan{cmd: wire.TxnCmd{Tenant: tenant}, pushes: map[int]pushPlan{}}
	add := func(kind string, request int, op uint8, body []byte) {
		plan.cmd.Ops = append(plan.cmd.Ops, wire.TxnOp{Kind: op, Body: body})
		plan.kinds, plan.requests = append(plan.kinds, kind), append(plan.requests, request)
	}
	for i, l := range req.RequiredLeases {
		id, err := wire.ParseID(l)
		if err != nil {
			return nil, &txnFault{badRequest("requiredLeases holds something that is not a lease id"), "requiredLease", i, ""}
		}
		plan.cmd.RequiredLeases = append(plan.cmd.RequiredLeases, id)
	}
	for i := range req.Operations {
		op := &req.Operations[i]
		switch op.Type {
		case "push":
			if len(op.Items) == 0 {
				return nil, &txnFault{badRequest("a push operation needs items"), op.Type, i, ""}
			}
			cmds, placed, ids, err := buildPushCommands(tenant, op.Items, sub)
			if err != nil {
				return nil, &txnFault{err, op.Type, i, ""}
			}
			plan.pushes[i] = pushPlan{first: len(plan.cmd.Ops), placed: placed, ids: ids}
			for c := range cmds {
				add(op.Type, i, wire.TxnOpPush, cmds[c].Encode(nil))
			}
		case "ack":
			cmds, _, err := buildAckCommands(tenant, "", []ackItem{op.ackItem})
			if err != nil {
				return nil, &txnFault{err, op.Type, i, ""}
			}
			add(op.Type, i, wire.TxnOpAck, cmds[0].Encode(nil))
		default:
			return nil, &txnFault{badRequest(fmt.Sprintf("operation type %q is not push or ack", op.Type)), op.Type, i, ""}
		}
	}
	for i := range req.Positions {
		pos, err := s.positionOp(&req.Positions[i])
		if err != nil {
			return nil, &txnFault{err, "position", i, ""}
		}
		plan.positions = append(plan.positions, pos)
		add("position", i, wire.TxnOpPosition, pos.Encode(nil))
	}
	if len(req.KV) > 0 {
		ops, err := txnKVOps(req.KV, s.cfg.KVMaxValueBytes)
		if err != nil {
			return nil, &txnFault{err, "kv", -1, ""}
		}
		add("kv", 0, wire.TxnOpKV, (&wire.KVCmd{Tenant: tenant, Ops: ops}).Encode(nil))
	}
	if len(req.Timers) > 0 {
		cmd, err := s.buildTimerOps(ctx, tenant, req.Timers)
		if err != nil {
			return nil, &txnFault{err, "timers", -1, ""}
		}
		add("timers", 0, wire.TxnOpTimers, cmd.Encode(nil))
	}
	return plan, nil
}

// txnKVOps validates a transaction's KV operations: those of POST
// /api/v1/kv, within the transaction's smaller limits.
func txnKVOps(reqs []kvOpRequest, valueLimit int) ([]wire.KVOp, error) {
	if len(reqs) > maxTxnKVOps {
		return nil, badRequest("a transaction holds at most 64 KV operations")
	}
	ops, err := kvBuildOps(reqs, valueLimit)
	if err != nil {
		return nil, err
	}
	keys := 0
	for _, o := range ops {
		keys += 1 + len(o.Keys)
	}
	if keys > maxTxnKVKeys {
		return nil, badRequest("a transaction touches at most 256 KV keys")
	}
	return ops, nil
}

// positionOp validates one position write; offset null forgets the
// group's position in the partition.
func (s *Server) positionOp(p *txnPosition) (wire.PositionOp, error) {
	if p.Partition == "" {
		p.Partition = defaultPartition
	}
	op := wire.PositionOp{Queue: p.Queue, Group: p.ConsumerGroup, Partition: p.Partition, Metadata: p.Metadata, SubMode: s.cfg.DefaultSubscription}
	if op.Group == "" {
		op.Group = wire.QueueModeGroup
	}
	if err := checkNames(op.Queue, op.Partition, op.Group); err != nil {
		return op, err
	}
	switch p.SubscriptionMode {
	case "":
	case "new", "new-only":
		op.SubMode = wire.SubNew
	default:
		op.SubMode = wire.SubAll
	}
	switch {
	case len(p.Offset) == 0:
		return op, badRequest("a position needs an offset (or null to reset it)")
	case isNull(p.Offset):
		op.Reset = true
	default:
		n, err := strconv.ParseUint(string(p.Offset), 10, 64)
		if err != nil {
			return op, badRequest("offset must be a whole number or null")
		}
		op.Offset = n
	}
	return op, nil
}

// failure names what a rolled-back result blames.
func (plan *txnPlan) failure(req *txnRequest, res wire.TxnResult) *txnFault {
	err := res.Code.Err()
	switch {
	case res.FailedLease >= 0 && res.FailedLease < len(req.RequiredLeases):
		return &txnFault{fmt.Errorf("required lease %s is not held: %w", req.RequiredLeases[res.FailedLease], err), "requiredLease", res.FailedLease, ""}
	case res.FailedOp >= 0 && res.FailedOp < len(plan.kinds) && plan.kinds[res.FailedOp] == "kv":
		return &txnFault{fmt.Errorf("kv operation %d did not hold (%s): %w", res.FailedItem, res.Detail, err), "kv", res.FailedItem, res.Detail}
	case res.FailedOp >= 0 && res.FailedOp < len(plan.kinds):
		kind, index := plan.kinds[res.FailedOp], plan.requests[res.FailedOp]
		if text := ackErrorText(res.Code); kind == "ack" && text != err.Error() {
			err = fmt.Errorf("%s: %w", text, err)
		}
		return &txnFault{fmt.Errorf("%s %d: %w", kind, index, err), kind, index, ""}
	}
	return &txnFault{err, "", -1, ""}
}

// results renders a committed transaction: one result per operation, then
// one per position.
func (plan *txnPlan) results(req *txnRequest, res wire.TxnResult) ([]txnResult, error) {
	if len(res.Ops) != len(plan.kinds) {
		return nil, fmt.Errorf("transaction answered %d results for %d operations", len(res.Ops), len(plan.kinds))
	}
	var out []txnResult
	for w := 0; w < len(plan.kinds); w++ {
		kind, index := plan.kinds[w], plan.requests[w]
		r := txnResult{Index: index, Type: kind, Success: true}
		switch kind {
		case "push":
			pp := plan.pushes[index]
			n := 0
			for _, pl := range pp.placed {
				n = max(n, pl.cmd+1)
			}
			// A committed transaction applied every push: no outcome
			// carries an error.
			results := make([]raftgroups.PushOutcome, n)
			for c := range results {
				var err error
				if results[c].PushResult, err = wire.DecodePushResult(res.Ops[pp.first+c]); err != nil {
					return nil, err
				}
			}
			r.Items = pushAnswers(req.Operations[index].Items, pp.placed, pp.ids, results)
			w += n - 1
		case "ack":
			a, err := wire.DecodeAckResult(res.Ops[w])
			if err != nil || len(a.Items) != 1 {
				return nil, fmt.Errorf("transaction ack result: %v", err)
			}
			ans := ackAnswerOf(index, req.Operations[index].TransactionID, a.Items[0])
			r.ackAnswer = &ans
		case "kv":
			kv, err := wire.DecodeKVResult(res.Ops[w])
			if err != nil {
				return nil, err
			}
			for i := range kv.Ops {
				r.KV = append(r.KV, kvOpView(&kv.Ops[i]))
			}
		case "timers":
			tr, err := wire.DecodeTimersResult(res.Ops[w])
			if err != nil {
				return nil, err
			}
			r.Timers = timerAnswers(req.Timers, tr)
		case "position":
			p := &plan.positions[index]
			r.Queue, r.Partition, r.ConsumerGroup = p.Queue, p.Partition, p.Group
			if !p.Reset {
				r.Offset = &p.Offset
			}
		}
		out = append(out, r)
	}
	return out, nil
}
