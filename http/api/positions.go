package api

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// maxPositions bounds one positions call (spec §2.8's per-transaction
// limit for position writes).
const maxPositions = 16384

type positionWrite struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Partition     string `json:"partition"`
	Offset        uint64 `json:"offset"`
	Metadata      string `json:"metadata"`
}

type positionRead struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Partition     string `json:"partition"` // "": every partition
}

type positionRow struct {
	Queue         string  `json:"queue"`
	ConsumerGroup string  `json:"consumerGroup"`
	Partition     string  `json:"partition"`
	PartitionID   string  `json:"partitionId"`
	Index         uint32  `json:"index"`
	Offset        *uint64 `json:"offset"`
	Metadata      string  `json:"metadata"`
	HighWatermark uint64  `json:"highWatermark"`
	LogStart      uint64  `json:"logStartOffset"`
	Lag           uint64  `json:"lag"`
}

// positions is POST /api/v1/consumer-groups/positions: batch write and
// read of group positions (the next offset a group consumes, a Kafka
// committed offset). The shape is ours (Queen's is not recorded):
// {"consumerGroup":"g","write":[{queue,partition,offset,metadata}],
// "read":[{queue,partition?}]}, each item may name its own consumerGroup.
// Writes go first (in one raft entry per group holding their partitions),
// so the reads see them; results[i]
// answers write[i], positions lists every partition read (offset null
// where the group has no position).
func (s *Server) positions(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var req struct {
		ConsumerGroup string          `json:"consumerGroup"`
		Write         []positionWrite `json:"write"`
		Read          []positionRead  `json:"read"`
	}
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	if len(req.Write)+len(req.Read) == 0 || len(req.Write)+len(req.Read) > maxPositions {
		return badRequest("give 1..16384 write and read items")
	}
	if err := s.aclPositions(ctx, tenant, req.ConsumerGroup, req.Write, req.Read); err != nil {
		return err
	}
	groupOf := func(g string) string { return firstNonEmpty(g, firstNonEmpty(req.ConsumerGroup, wire.QueueModeGroup)) }
	cmds := make([]wire.CommitPositionCmd, len(req.Write))
	for i, w := range req.Write {
		g := groupOf(w.ConsumerGroup)
		if err := checkNames(w.Queue, w.Partition, g); err != nil {
			return err
		}
		cmds[i] = wire.CommitPositionCmd{Tenant: tenant, Queue: w.Queue, Group: g, Partition: w.Partition,
			PartitionIndex: -1, Offset: w.Offset, Metadata: w.Metadata}
	}
	results := []map[string]any{}
	if len(cmds) > 0 {
		rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
		res, err := s.engine.CommitPositions(rctx, tenant, cmds)
		cancel()
		if err != nil {
			return err
		}
		for i, r := range res {
			var msg *string
			if e := r.Code.Err(); e != nil {
				m := e.Error()
				msg = &m
			}
			results = append(results, map[string]any{"index": i, "success": r.Code == wire.CodeOK, "error": msg})
		}
	}
	rows := []positionRow{}
	if len(req.Read) > 0 {
		v, err := s.view(tenant)
		if err != nil {
			return err
		}
		for _, r := range req.Read {
			g := groupOf(r.ConsumerGroup)
			if err := checkNames(r.Queue, r.Partition, g); err != nil {
				return err
			}
			rows = append(rows, readPositions(v, r.Queue, r.Partition, g)...)
		}
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"results": results, "positions": rows})
	return nil
}

func readPositions(v *tenantView, queue, partition, group string) []positionRow {
	var out []positionRow
	for _, q := range v.queues(storage.QueueFilter{Name: queue, Partitions: true}, nowMs()) {
		for pi := range q.Partitions {
			p := &q.Partitions[pi]
			if partition != "" && p.Name != partition {
				continue
			}
			row := positionRow{Queue: q.Name, ConsumerGroup: group, Partition: p.Name, PartitionID: pidString(p.ID),
				Index: p.Index, HighWatermark: p.HighWatermark, LogStart: p.LogStart, Lag: p.Retained()}
			if c := p.Cursor(group); c != nil {
				pos := c.Pos
				row.Offset, row.Metadata, row.Lag = &pos, c.Metadata, min(c.Backlog(p.HighWatermark), p.Retained())
			}
			out = append(out, row)
		}
	}
	return out
}
