package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// Limits of the partition-discovery route (spec §2.16 leaves them open).
const (
	defaultChangedLimit = 1000
	maxChangedLimit     = 10000
)

// flexTime is a point in time sent as unix milliseconds or an ISO 8601
// (RFC 3339) string; fetch/offsets also takes Kafka's -1 (latest) and -2
// (earliest).
type flexTime struct {
	ms  int64
	set bool
}

func (t *flexTime) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		switch strings.ToLower(s) {
		case "latest":
			t.ms, t.set = -1, true
			return nil
		case "earliest":
			t.ms, t.set = -2, true
			return nil
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return badRequest("a time must be unix milliseconds or an ISO 8601 timestamp")
		}
		t.ms, t.set = at.UnixMilli(), true
		return nil
	}
	n, err := wholeNumber(b)
	if err != nil {
		return badRequest("a time must be unix milliseconds or an ISO 8601 timestamp")
	}
	t.ms, t.set = n, true
	return nil
}

type offsetsRequest struct {
	Entries []struct {
		Queue     string   `json:"queue"`
		Partition string   `json:"partition"`
		Timestamp flexTime `json:"timestamp"`
	} `json:"entries"`
}

type offsetsEntry struct {
	Queue          string  `json:"queue"`
	Partition      string  `json:"partition"`
	Offset         *uint64 `json:"offset"`
	TS             *string `json:"ts"`
	HighWatermark  uint64  `json:"highWatermark"`
	LogStartOffset uint64  `json:"logStartOffset"`
	Error          string  `json:"error,omitempty"`
}

// fetchOffsets is POST /api/v1/fetch/offsets (spec §2.16): for each entry
// the first offset appended at or after timestamp (by the broker's append
// time) and that record's time; the high-water mark and no ts when nothing
// is that recent. -1 asks for the high-water mark, -2 for the log start,
// as Kafka's ListOffsets does. Read from this node's replica of each
// partition's group.
func (s *Server) fetchOffsets(ctx *fasthttp.RequestCtx) error {
	var req offsetsRequest
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	if err := checkEntries(len(req.Entries)); err != nil {
		return err
	}
	out := make([]offsetsEntry, len(req.Entries))
	for i, e := range req.Entries {
		if e.Partition == "" {
			e.Partition = defaultPartition
		}
		if err := checkNames(e.Queue, e.Partition); err != nil {
			return err
		}
		if !e.Timestamp.set {
			return badRequest("each entry needs a timestamp")
		}
		a := offsetsEntry{Queue: e.Queue, Partition: e.Partition}
		s.catchUpUnknown(tenant, e.Queue, e.Partition)
		p, ok := s.engine.PartitionNamed(tenant, e.Queue, e.Partition)
		if !ok {
			a.Error = fetchErrUnknown
			out[i] = a
			continue
		}
		a.HighWatermark, a.LogStartOffset = p.HighWatermark(), p.LogStart()
		var off uint64
		switch e.Timestamp.ms {
		case -1:
			off = a.HighWatermark
		case -2:
			off = a.LogStartOffset
		default:
			o, at, found, err := p.Store().OffsetForTime(p, e.Timestamp.ms)
			if err != nil {
				return err
			}
			if off = o; found {
				ts := isoMillis(at)
				a.TS = &ts
			}
		}
		a.Offset = &off
		out[i] = a
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"entries": out})
	return nil
}

type changedRequest struct {
	Entries []struct {
		Queue string          `json:"queue"`
		Since flexTime        `json:"since"`
		Limit int             `json:"limit"`
		After json.RawMessage `json:"after"`
	} `json:"entries"`
}

type changedPartition struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	Index         uint32 `json:"index"`
	LastOffset    int64  `json:"lastOffset"`
	HighWatermark uint64 `json:"highWatermark"`
	LogStart      uint64 `json:"logStart"`
	LastWriteAt   string `json:"lastWriteAt"`
}

type changedEntry struct {
	Queue      string             `json:"queue"`
	Partitions []changedPartition `json:"partitions"`
	Next       *string            `json:"next"`
	Error      string             `json:"error,omitempty"`
}

// partitionsChanged is POST /api/v1/partitions/changed (spec §2.16): per
// queue, the partitions with a write at or after since, in partition index
// order, at most limit of them; next is the cursor to pass as after for
// the rest (null at the end). safeTime is the oldest replicated clock of
// the groups holding the queues' partitions: every write not yet visible
// will carry a later time, so polling again with since = safeTime misses
// nothing.
func (s *Server) partitionsChanged(ctx *fasthttp.RequestCtx) error {
	var req changedRequest
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	if err := checkEntries(len(req.Entries)); err != nil {
		return err
	}
	// Clocks are read before any partition is, so a write a listing
	// misses carries a later time than the clock read.
	clocks := s.groupClocks(tenant)
	out := make([]changedEntry, len(req.Entries))
	for i, e := range req.Entries {
		if err := checkName("queue", e.Queue); err != nil {
			return err
		}
		limit := e.Limit
		if limit == 0 {
			limit = defaultChangedLimit
		}
		if limit < 1 || limit > maxChangedLimit {
			return badRequest("limit must be 1..10000")
		}
		after := int64(-1)
		if len(e.After) > 0 && !isNull(e.After) {
			n, err := strconv.ParseInt(strings.Trim(string(e.After), `"`), 10, 64)
			if err != nil || n < -1 || n > math.MaxUint32 {
				return badRequest("after must be a cursor from next")
			}
			after = n
		}
		a := changedEntry{Queue: e.Queue, Partitions: []changedPartition{}}
		parts, more, ok := s.engine.ChangedPartitions(tenant, e.Queue, e.Since.ms, after, limit)
		if !ok {
			a.Error = fetchErrUnknown
		}
		for _, p := range parts {
			hwm := p.HighWatermark()
			a.Partitions = append(a.Partitions, changedPartition{ID: strconv.FormatUint(p.ID, 10), Name: p.Name, Index: p.Index,
				LastOffset: int64(hwm) - 1, HighWatermark: hwm, LogStart: p.LogStart(), LastWriteAt: isoMillis(p.LastWriteMs())})
		}
		if more {
			next := strconv.FormatUint(uint64(parts[len(parts)-1].Index), 10)
			a.Next = &next
		}
		out[i] = a
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"entries": out, "safeTime": isoMillis(s.safeTime(tenant, clocks, out))})
	return nil
}

// groupClocks reads the replicated clock of every group the tenant's data
// may be in.
func (s *Server) groupClocks(tenant wire.ID) map[int]int64 {
	out := map[int]int64{}
	for _, g := range s.engine.TenantGroups(tenant) {
		out[g] = s.engine.GroupStore(g).ClockMs()
	}
	return out
}

// safeTime is the oldest of clocks among the groups holding the entries'
// queues. Each group has its own clock, and a write not yet applied in a
// group carries a time after that group's clock only, so the newest clock
// would let a poll skip writes of a group that lags. The groups are looked
// up after the listing, so a group a queue spread to meanwhile counts.
func (s *Server) safeTime(tenant wire.ID, clocks map[int]int64, entries []changedEntry) int64 {
	safe := int64(math.MaxInt64)
	for _, e := range entries {
		for _, g := range s.engine.QueueGroups(tenant, e.Queue) {
			if c, ok := clocks[g]; ok {
				safe = min(safe, c)
			}
		}
	}
	if safe == math.MaxInt64 {
		return 0 // no clock read: claim nothing rather than a future time
	}
	return safe
}

var _ json.Unmarshaler = (*flexTime)(nil)
