package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// flexID accepts a partition id sent as a JSON string or number.
type flexID uint64

func (f *flexID) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return badRequest("partitionId must be a numeric id")
	}
	*f = flexID(n)
	return nil
}

type ackItem struct {
	TransactionID string `json:"transactionId"`
	PartitionID   flexID `json:"partitionId"`
	ConsumerGroup string `json:"consumerGroup"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
	Error         string `json:"error"`
}

type ackBatchRequest struct {
	ConsumerGroup   string    `json:"consumerGroup"`
	Acknowledgments []ackItem `json:"acknowledgments"`
}

type ackAnswer struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Noop          bool    `json:"noop"`
	Conflated     bool    `json:"conflated"`
}

// ack is POST /api/v1/ack (spec §2.6).
func (s *Server) ack(ctx *fasthttp.RequestCtx) error {
	var it ackItem
	if err := readJSON(ctx, &it); err != nil {
		return err
	}
	return s.acknowledge(ctx, it.ConsumerGroup, []ackItem{it})
}

// ackBatch is POST /api/v1/ack/batch: every acknowledgment in one command.
func (s *Server) ackBatch(ctx *fasthttp.RequestCtx) error {
	var req ackBatchRequest
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	if len(req.Acknowledgments) == 0 {
		return badRequest("acknowledgments must be a non-empty array")
	}
	if len(req.Acknowledgments) > wire.MaxAckItems {
		return badRequest("too many acknowledgments in one call")
	}
	return s.acknowledge(ctx, req.ConsumerGroup, req.Acknowledgments)
}

// acknowledge applies acknowledgments, in one raft entry per group holding
// their partitions (an ack is routed by its partition id). Each item is
// acknowledged for its own consumerGroup, else the request's, else the
// queue-mode group.
func (s *Server) acknowledge(ctx *fasthttp.RequestCtx, group string, items []ackItem) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	cmds, placed, err := buildAckCommands(tenant, group, items)
	if err != nil {
		return err
	}
	if err := s.aclAcks(ctx, tenant, group, items); err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.AckGroups(rctx, tenant, cmds)
	if err != nil {
		return err
	}
	out := make([]ackAnswer, len(items))
	for i, it := range items {
		out[i] = ackAnswerOf(i, it.TransactionID, res[placed[i].cmd].Items[placed[i].rec])
	}
	writeJSON(ctx, http.StatusOK, out)
	return nil
}

// buildAckCommands validates acknowledgments and groups them into one ack
// command per consumer group, in first-appearance order; placed says
// where each item went.
func buildAckCommands(tenant wire.ID, group string, items []ackItem) ([]wire.AckCmd, []itemPlace, error) {
	var cmds []wire.AckCmd
	byGroup := map[string]int{}
	placed := make([]itemPlace, len(items))
	for i, it := range items {
		g := it.ConsumerGroup
		if g == "" {
			g = group
		}
		if g == "" {
			g = wire.QueueModeGroup
		}
		if err := checkName("consumerGroup", g); err != nil {
			return nil, nil, err
		}
		if it.TransactionID == "" || it.PartitionID == 0 {
			return nil, nil, badRequest("each acknowledgment needs transactionId and partitionId")
		}
		if len(it.TransactionID) > maxTxnIDBytes {
			return nil, nil, badRequest("transactionId is longer than 65535 bytes")
		}
		status, ok := ackStatus(it.Status)
		if !ok {
			return nil, nil, badRequest("status must be completed, failed, retry or dlq")
		}
		ai := wire.AckItem{PartitionID: uint64(it.PartitionID), TxnID: []byte(it.TransactionID), Status: status, Error: it.Error}
		if it.LeaseID != "" {
			var err error
			if ai.LeaseID, err = wire.ParseID(it.LeaseID); err != nil {
				return nil, nil, badRequest("leaseId is not a lease id")
			}
		}
		ci, ok := byGroup[g]
		if !ok {
			ci = len(cmds)
			byGroup[g] = ci
			cmds = append(cmds, wire.AckCmd{Tenant: tenant, Group: g})
		}
		placed[i] = itemPlace{cmd: ci, rec: len(cmds[ci].Items)}
		cmds[ci].Items = append(cmds[ci].Items, ai)
	}
	return cmds, placed, nil
}

// ackAnswerOf renders one acknowledgment's outcome (spec §2.6).
func ackAnswerOf(index int, txn string, o wire.AckOutcome) ackAnswer {
	a := ackAnswer{Index: index, TransactionID: txn, LeaseReleased: o.LeaseReleased, DLQ: o.DLQ}
	switch o.Code {
	case wire.CodeOK:
		a.Success = true
	case wire.CodeNoop:
		a.Success, a.Noop = true, true
	default:
		msg := ackErrorText(o.Code)
		a.Error = &msg
	}
	return a
}

func ackStatus(s string) (uint8, bool) {
	switch strings.ToLower(s) {
	case "", "completed", "success", "acked", "ok":
		return wire.AckCompleted, true
	case "failed":
		return wire.AckFailed, true
	case "retry":
		return wire.AckRetry, true
	case "dlq":
		return wire.AckDLQ, true
	}
	return 0, false
}

// ackErrorText names why an acknowledgment was refused.
func ackErrorText(c wire.Code) string {
	switch c {
	case wire.CodeLeaseMismatch:
		return "rejected_ack: the lease no longer holds this message"
	case wire.CodeNotLeased:
		return "message is not leased to this consumer group"
	case wire.CodeMessageNotFound:
		return "message not found"
	case wire.CodePartitionNotFound:
		return "partition not found"
	}
	return c.Err().Error()
}

var _ json.Unmarshaler = (*flexID)(nil)
