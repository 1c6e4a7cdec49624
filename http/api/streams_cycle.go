package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// A streaming cycle (POST /streams/v1/cycle) is one transaction (the one
// /api/v1/transaction commits): the state writes as a KV operation in the
// Streams namespace, the sink pushes as push operations, the source's
// cumulative acknowledgment as a wire.TxnOpStreamAck. In one raft entry
// when they live in one group, by the cross-group commit otherwise.

type streamCycleRequest struct {
	QueryID       string          `json:"query_id"`
	PartitionID   streamPartition `json:"partition_id"`
	ConsumerGroup string          `json:"consumer_group"`
	StateOps      []streamStateOp `json:"state_ops"`
	PushItems     []pushItem      `json:"push_items"`
	Ack           *streamCycleAck `json:"ack"`
	ReleaseLease  *bool           `json:"release_lease"`
}

type streamStateOp struct {
	Type  string          `json:"type"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type streamCycleAck struct {
	TransactionID string `json:"transactionId"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
	Count         *int64 `json:"count"`
	Error         string `json:"error"`
}

type streamAckAnswer struct {
	Success       bool  `json:"success"`
	Count         int64 `json:"count"`
	LeaseReleased bool  `json:"lease_released"`
	DLQ           bool  `json:"dlq"`
}

type streamCycleAnswer struct {
	Success         bool             `json:"success"`
	QueryID         string           `json:"query_id,omitempty"`
	PartitionID     string           `json:"partition_id,omitempty"`
	QueueName       string           `json:"queueName,omitempty"`
	StateOpsApplied *int             `json:"state_ops_applied,omitempty"`
	PushResults     []pushAnswer     `json:"push_results,omitempty"`
	AckResult       *streamAckAnswer `json:"ack_result,omitempty"`
	Error           string           `json:"error,omitempty"`
}

// streamCyclePlan is the cycle's transaction and what its answer is
// rendered from.
type streamCyclePlan struct {
	cmd       wire.TxnCmd
	pushFirst int // the first push operation; pushes are pushCmds operations from there
	pushCmds  int
	placed    []itemPlace
	ids       []wire.ID
	ackOp     int // -1: no acknowledgment
	count     int64
}

// streamsCycle is POST /streams/v1/cycle. A body that is not JSON is a
// 400; a cycle that cannot be applied (bad operation, unknown query, a
// lease not the group's, a duplicate...) answers 200 {success:false, error}
// with nothing changed, as Queen's SDKs expect; an unknown outcome (no
// leader, timeout) is the error envelope, as for a transaction.
func (s *Server) streamsCycle(ctx *fasthttp.RequestCtx) error {
	var req streamCycleRequest
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		s.metrics.GetOrCreateCounter(`queen_streams_cycles_total{outcome="rolled_back"}`).Inc()
		writeJSON(ctx, http.StatusOK, streamCycleAnswer{Error: err.Error()})
		return nil
	}
	// The embedded proxy's push check (caps, rates), when it set one for
	// this request, judges the sink pushes as it judges a push's items: a
	// refusal is its status, as for a push.
	if len(req.PushItems) > 0 {
		if err := checkProxiedPush(ctx, req.PushItems); err != nil {
			return err
		}
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	q, plan, err := s.planCycle(rctx, tenant, producerSub(ctx), &req)
	if err != nil {
		if _, rollback := txnReason(err); rollback {
			return fail(err)
		}
		return err
	}
	if len(plan.cmd.Ops) == 0 {
		// Nothing to commit (a cycle of an idle window): answered as one
		// that committed nothing.
		ans, err := plan.answer(&req, q, wire.TxnResult{Code: wire.CodeOK})
		if err != nil {
			return err
		}
		writeJSON(ctx, http.StatusOK, ans)
		return nil
	}
	res, err := s.engine.Transaction(rctx, &plan.cmd)
	switch {
	case errors.Is(err, raftgroups.ErrStreamsFormat):
		return fail(err)
	case err != nil:
		if _, rollback := txnReason(err); rollback {
			return fail(err)
		}
		return err
	case res.Code != wire.CodeOK:
		return fail(plan.failure(res))
	}
	ans, err := plan.answer(&req, q, res)
	if err != nil {
		return err
	}
	s.metrics.GetOrCreateCounter(`queen_streams_cycles_total{outcome="committed"}`).Inc()
	s.metrics.GetOrCreateCounter("queen_streams_state_ops_total").Add(len(req.StateOps))
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// planCycle validates the request and builds the cycle's transaction.
func (s *Server) planCycle(ctx context.Context, tenant wire.ID, sub string, req *streamCycleRequest) (*streamQuery, *streamCyclePlan, error) {
	if req.QueryID == "" {
		return nil, nil, badRequest("query_id is required")
	}
	if err := req.PartitionID.check(); err != nil {
		return nil, nil, err
	}
	if len(req.StateOps) > maxStreamStateOps {
		return nil, nil, badRequest("state_ops holds at most " + strconv.Itoa(maxStreamStateOps) + " operations")
	}
	if len(req.PushItems) > s.cfg.MaxPushItems {
		return nil, nil, badRequest("push_items holds more items than QUEEN_MAX_PUSH_ITEMS")
	}
	if req.ConsumerGroup == "" {
		req.ConsumerGroup = wire.QueueModeGroup
	}
	if err := checkName("consumer_group", req.ConsumerGroup); err != nil {
		return nil, nil, err
	}
	q, found, err := s.streamQueryByID(ctx, tenant, req.QueryID)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, badRequest("no such query: " + req.QueryID)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, nil, err
	}
	plan := &streamCyclePlan{cmd: wire.TxnCmd{Tenant: tenant, ID: wire.ID(id)}, ackOp: -1}
	if len(req.PushItems) > 0 {
		cmds, placed, ids, err := buildPushCommands(tenant, req.PushItems, sub)
		if err != nil {
			return nil, nil, err
		}
		plan.pushFirst, plan.pushCmds, plan.placed, plan.ids = len(plan.cmd.Ops), len(cmds), placed, ids
		for i := range cmds {
			cmds[i].Flags |= wire.PushSkipDups
			plan.cmd.Ops = append(plan.cmd.Ops, wire.TxnOp{Kind: wire.TxnOpPush, Body: cmds[i].Encode(nil)})
		}
	}
	if len(req.StateOps) > 0 {
		ops, err := s.cycleStateOps(ctx, tenant, q, string(req.PartitionID), req.StateOps)
		if err != nil {
			return nil, nil, err
		}
		plan.cmd.Ops = append(plan.cmd.Ops, wire.TxnOp{Kind: wire.TxnOpKV, Body: (&wire.KVCmd{Tenant: tenant, Ops: ops}).Encode(nil)})
	}
	if req.Ack != nil {
		op, err := cycleAck(tenant, req)
		if err != nil {
			return nil, nil, err
		}
		plan.ackOp, plan.count = len(plan.cmd.Ops), int64(op.Count)
		plan.cmd.Ops = append(plan.cmd.Ops, wire.TxnOp{Kind: wire.TxnOpStreamAck, Body: op.Encode(nil)})
	}
	return q, plan, nil
}

// cycleStateOps turns the state operations into KV operations on the
// partition's rows of the query's generation. A row's value is sealed when
// the query's sink queue (else its source queue) is encrypted.
func (s *Server) cycleStateOps(ctx context.Context, tenant wire.ID, q *streamQuery, partition string, in []streamStateOp) ([]wire.KVOp, error) {
	queue := q.SinkQueue
	if queue == "" {
		queue = q.SourceQueue
	}
	seal := s.engine.QueueEncryptedNow(ctx, tenant, queue)
	prefix := streamStatePrefix(q, partition)
	now := time.Now().UnixMilli()
	ops := make([]wire.KVOp, 0, len(in))
	for i, op := range in {
		if op.Key == "" || len(op.Key) > maxStreamKeyBytes {
			return nil, badRequest(fmt.Sprintf("state_ops[%d]: key must be 1..%d bytes", i, maxStreamKeyBytes))
		}
		key := append(append([]byte(nil), prefix...), op.Key...)
		switch strings.ToLower(op.Type) {
		case "upsert", "put", "set":
			if len(op.Value) == 0 {
				op.Value = json.RawMessage("null")
			}
			if len(op.Value) > s.cfg.KVMaxValueBytes {
				return nil, &apiError{http.StatusRequestEntityTooLarge, "value_too_large", "a state value is larger than QUEEN_KV_MAX_VALUE_BYTES"}
			}
			b, err := json.Marshal(streamRow{Value: compactJSON(op.Value), UpdatedMs: now})
			if err != nil {
				return nil, badRequest(fmt.Sprintf("state_ops[%d]: value is not JSON", i))
			}
			if seal {
				if b, err = s.engine.SealText(b); err != nil {
					return nil, err
				}
			}
			ops = append(ops, wire.KVOp{Op: wire.KVPut, NS: wire.StreamsNamespace, Key: key, Value: b})
		case "delete":
			// Not required: deleting a row that is not there is no error.
			ops = append(ops, wire.KVOp{Op: wire.KVDelete, NS: wire.StreamsNamespace, Key: key})
		default:
			return nil, badRequest(fmt.Sprintf("state_ops[%d]: type must be upsert or delete", i))
		}
	}
	return ops, nil
}

// cycleAck builds the cumulative acknowledgment of the source partition.
func cycleAck(tenant wire.ID, req *streamCycleRequest) (wire.StreamAckOp, error) {
	a := req.Ack
	pid, err := strconv.ParseUint(string(req.PartitionID), 10, 64)
	if err != nil || pid == 0 {
		return wire.StreamAckOp{}, badRequest("an ack needs a numeric partition_id (the pop's partitionId)")
	}
	if a.TransactionID == "" || len(a.TransactionID) > maxTxnIDBytes {
		return wire.StreamAckOp{}, badRequest("ack.transactionId is required")
	}
	op := wire.StreamAckOp{Tenant: tenant, Group: req.ConsumerGroup, PartitionID: pid, TxnID: []byte(a.TransactionID),
		Error: a.Error, Release: req.ReleaseLease == nil || *req.ReleaseLease, Count: 1}
	if a.LeaseID != "" {
		if op.LeaseID, err = wire.ParseID(a.LeaseID); err != nil {
			return op, badRequest("ack.leaseId is not a lease id")
		}
	}
	switch strings.ToLower(a.Status) {
	case "", "completed", "success":
		op.Status = wire.AckCompleted
	case "failed":
		op.Status = wire.AckFailed
	case "dlq":
		op.Status = wire.AckDLQ
	default:
		return op, badRequest("ack.status must be completed, success, failed or dlq")
	}
	if a.Count != nil {
		if *a.Count < 0 || *a.Count > 1<<31 {
			return op, badRequest("ack.count must be a non-negative count")
		}
		op.Count = uint32(*a.Count)
	}
	return op, nil
}

// failure says why a cycle rolled back.
func (plan *streamCyclePlan) failure(res wire.TxnResult) error {
	err := res.Code.Err()
	switch {
	case res.FailedOp < 0:
	case res.FailedOp == plan.ackOp:
		return fmt.Errorf("ack: %s: %w", ackErrorText(res.Code), err)
	case res.FailedOp >= plan.pushFirst && res.FailedOp < plan.pushFirst+plan.pushCmds:
		return fmt.Errorf("push_items: %w", err)
	default:
		if res.Detail != "" {
			return fmt.Errorf("state_ops[%d]: %s: %w", res.FailedItem, res.Detail, err)
		}
		return fmt.Errorf("state_ops: %w", err)
	}
	return err
}

// answer renders a committed cycle.
func (plan *streamCyclePlan) answer(req *streamCycleRequest, q *streamQuery, res wire.TxnResult) (streamCycleAnswer, error) {
	n := len(req.StateOps)
	ans := streamCycleAnswer{Success: true, QueryID: q.ID, PartitionID: string(req.PartitionID), QueueName: q.SourceQueue,
		StateOpsApplied: &n, PushResults: []pushAnswer{}, AckResult: &streamAckAnswer{Success: true}}
	if len(res.Ops) != len(plan.cmd.Ops) {
		return ans, fmt.Errorf("streams: cycle answered %d results for %d operations", len(res.Ops), len(plan.cmd.Ops))
	}
	if plan.pushCmds > 0 {
		results := make([]raftgroups.PushOutcome, plan.pushCmds)
		for c := range results {
			var err error
			if results[c].PushResult, err = wire.DecodePushResult(res.Ops[plan.pushFirst+c]); err != nil {
				return ans, err
			}
		}
		ans.PushResults = pushAnswers(req.PushItems, plan.placed, plan.ids, results)
	}
	if plan.ackOp >= 0 {
		a, err := wire.DecodeStreamAckResult(res.Ops[plan.ackOp])
		if err != nil {
			return ans, err
		}
		ans.AckResult = &streamAckAnswer{Success: a.Code == wire.CodeOK, Count: plan.count, LeaseReleased: a.LeaseReleased, DLQ: a.DLQ}
	}
	return ans, nil
}
