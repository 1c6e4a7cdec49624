package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

type pushRequest struct {
	Items []pushItem `json:"items"`
}

type pushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId"`
}

type pushAnswer struct {
	Index         int     `json:"index"`
	MessageID     string  `json:"message_id,omitempty"`
	TransactionID string  `json:"transaction_id,omitempty"`
	QueueName     string  `json:"queueName"`
	Status        string  `json:"status"`
	Offset        *uint64 `json:"offset,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// push is POST /api/v1/push (spec §2.4): items are grouped by queue and
// partition and each group becomes one push command. The commands whose
// partitions live in one raft group commit together; commands in different
// groups commit independently, so an item can fail alone (status "error").
// The request fails as a whole only when nothing committed.
func (s *Server) push(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var req pushRequest
	if req.Items, err = readPushItems(ctx.PostBody(), s.cfg.MaxPushItems); err != nil {
		return err
	}
	if len(req.Items) == 0 {
		// Queen answers an empty batch 201 []: its SDKs flush empty
		// buffers. Nothing is proposed.
		writeJSON(ctx, http.StatusCreated, []pushAnswer{})
		return nil
	}
	if err := checkProxiedPush(ctx, req.Items); err != nil {
		return err
	}
	if err := s.aclPush(ctx, tenant, req.Items); err != nil {
		return err
	}
	release, err := takePushItems(s.pushing, tenant, len(req.Items))
	if err != nil {
		return err
	}
	defer release()
	cmds, placed, ids, err := buildPushCommands(tenant, req.Items, producerSub(ctx))
	if err != nil {
		return err
	}
	if holding(s.engine) { // maintenance mode (maintenance_hold.go)
		if held, err := s.holdPush(ctx, tenant, req.Items, cmds, ids); held || err != nil {
			return err
		}
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	results, err := s.engine.Push(rctx, tenant, cmds)
	if err != nil {
		return err
	}
	if allMoving(results) {
		// Nothing stored, only because the partitions are sealed while
		// they move to another raft group: a retriable 503 as a whole,
		// which clients retry as they do an election (placement.md).
		return wire.ErrPartitionMoving
	}
	answers := pushAnswers(req.Items, placed, ids, results)
	s.traffic.pushed(answers, len(ctx.PostBody()))
	writeJSON(ctx, http.StatusCreated, answers)
	return nil
}

// pushAnswers renders each item's outcome in input order (spec §2.4): an
// item whose command its group refused or could not commit is an error.
func pushAnswers(items []pushItem, placed []itemPlace, ids []wire.ID, results []raftgroups.PushOutcome) []pushAnswer {
	out := make([]pushAnswer, len(items))
	for i, it := range items {
		p := placed[i]
		res := &results[p.cmd]
		a := pushAnswer{Index: i, QueueName: it.Queue}
		if err := pushError(res); err != nil {
			a.Status, a.Error = "error", err.Error()
			out[i] = a
			continue
		}
		off, dup := res.Offset(p.rec)
		msgID := ids[i]
		a.Status = "queued"
		// A duplicate of this very request's own message id is a retried
		// proposal that committed twice: from the client's view it is
		// simply queued.
		if dup != nil && dup.MsgID != msgID {
			a.Status, msgID = "duplicate", dup.MsgID
		}
		a.MessageID = msgID.String()
		a.TransactionID = it.TransactionID
		if a.TransactionID == "" {
			a.TransactionID = a.MessageID
		}
		a.Offset = &off
		out[i] = a
	}
	return out
}

// allMoving reports whether every command was refused because its
// partition is moving to another raft group.
func allMoving(results []raftgroups.PushOutcome) bool {
	for i := range results {
		if results[i].Err != nil || results[i].Code != wire.CodePartitionMoved {
			return false
		}
	}
	return len(results) > 0
}

// pushError is why a push command did not store its records, or nil.
func pushError(res *raftgroups.PushOutcome) error {
	if res.Err != nil {
		return res.Err
	}
	return res.Code.Err()
}

// itemPlace says where an item went: which command, which record in it.
type itemPlace struct{ cmd, rec int }

// buildPushCommands validates every item and groups them by queue and
// partition in first-appearance order, recording the producer's JWT
// subject. The engine seals the records of encrypted queues. Nothing is
// proposed if any item is invalid.
func buildPushCommands(tenant wire.ID, items []pushItem, sub string) ([]wire.PushCmd, []itemPlace, []wire.ID, error) {
	type key struct{ queue, partition string }
	byKey := map[key]int{}
	var cmds []wire.PushCmd
	placed := make([]itemPlace, len(items))
	ids := make([]wire.ID, len(items))
	for i := range items {
		it := &items[i]
		if it.Partition == "" {
			it.Partition = defaultPartition
		}
		if err := checkNames(it.Queue, it.Partition); err != nil {
			return nil, nil, nil, err
		}
		if len(it.TransactionID) > maxTxnIDBytes {
			return nil, nil, nil, badRequest("transactionId is longer than 65535 bytes")
		}
		payload := bytes.TrimSpace(it.Payload)
		if len(payload) == 0 {
			payload = []byte("null")
		}
		k := key{it.Queue, it.Partition}
		ci, ok := byKey[k]
		if !ok {
			// The engine creates the queue and partition when missing
			// and derives the queue's labels from its name.
			ci = len(cmds)
			byKey[k] = ci
			cmds = append(cmds, wire.PushCmd{Tenant: tenant, Queue: it.Queue, Partition: it.Partition,
				PartitionIndex: -1, Flags: wire.PushIndexTxn})
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, nil, nil, err
		}
		ids[i] = wire.ID(id)
		rec := wire.Record{Flags: wire.FlagJSON, MsgID: ids[i], Payload: payload}
		if it.TransactionID != "" {
			rec.Flags |= wire.FlagTxnID
			rec.TxnID = []byte(it.TransactionID)
		}
		if it.TraceID != "" {
			rec.Flags |= wire.FlagTrace
			rec.TraceID = []byte(it.TraceID)
		}
		if sub != "" {
			rec.Flags |= wire.FlagSub
			rec.ProducerSub = []byte(sub)
		}
		c := &cmds[ci]
		c.Records = wire.AppendRecord(c.Records, &rec)
		placed[i] = itemPlace{cmd: ci, rec: c.Count}
		c.Count++
	}
	return cmds, placed, ids, nil
}
