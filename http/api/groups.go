package api

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Consumer-group routes (spec §2.3 rows 52–60, §2.11). Shapes follow
// Queen's get_consumer_groups_v4, get_consumer_group_details_v1,
// get_lagging_partitions_v1 and the seek/delete procedures; lag is exact:
// offsets from the cursors, time from the oldest unconsumed record.

// laggingAfter is when a group counts as "Lagging" (Queen: 300 s).
const laggingAfterSec = 300

func subModeName(m uint8) string {
	switch m {
	case wire.SubAll:
		return "all"
	case wire.SubFrom:
		return "timestamp"
	}
	return "new"
}

// subTimestamp is where a subscription starts untouched partitions.
func subTimestamp(sub *storage.SubscriptionView) *string {
	switch sub.Mode {
	case wire.SubFrom:
		return isoOrNil(sub.FromMs)
	case wire.SubNew:
		return isoOrNil(sub.CreatedMs)
	}
	return nil
}

type groupRow struct {
	Name                  string   `json:"name"`
	Topics                []string `json:"topics"`
	QueueName             string   `json:"queueName"`
	Members               int      `json:"members"`
	PartitionCursors      int      `json:"partitionCursors"`
	PartitionsWithLag     int      `json:"partitionsWithLag"`
	TotalLag              uint64   `json:"totalLag"`
	MaxTimeLag            int64    `json:"maxTimeLag"`
	State                 string   `json:"state"`
	SubscriptionMode      *string  `json:"subscriptionMode"`
	SubscriptionTimestamp *string  `json:"subscriptionTimestamp"`
	SubscriptionCreatedAt *string  `json:"subscriptionCreatedAt"`
	Conflation            any      `json:"conflation"`
}

// groupRows builds one row per (group, queue) the tenant has, by group
// then queue; only group when it is set. members counts partitions with a
// live lease (a consumer holding it now), partitionCursors every
// partition the group has a position in.
func groupRows(v *tenantView, qs []storage.QueueView, only string) []groupRow {
	now := nowMs()
	var out []groupRow
	for qi := range qs {
		q := &qs[qi]
		rows := map[string]*groupRow{}
		row := func(g string) *groupRow {
			if rows[g] == nil {
				rows[g] = &groupRow{Name: g, Topics: []string{q.Name}, QueueName: q.Name, State: "Dead"}
			}
			return rows[g]
		}
		for i := range q.Subscriptions {
			sub := &q.Subscriptions[i]
			if only != "" && sub.Group != only {
				continue
			}
			r, mode := row(sub.Group), subModeName(sub.Mode)
			r.SubscriptionMode, r.SubscriptionTimestamp, r.SubscriptionCreatedAt = &mode, subTimestamp(sub), isoOrNil(sub.CreatedMs)
		}
		for pi := range q.Partitions {
			p := &q.Partitions[pi]
			for ci := range p.Cursors {
				c := &p.Cursors[ci]
				if only != "" && c.Group != only {
					continue
				}
				r := row(c.Group)
				r.PartitionCursors++
				r.State = "Stable"
				if c.LeaseExpiresMs > 0 {
					r.Members++
				}
				if off, secs := lagOf(v, p, c, now); off > 0 {
					r.PartitionsWithLag++
					r.TotalLag += off
					r.MaxTimeLag = max(r.MaxTimeLag, secs)
				}
			}
		}
		for _, r := range rows {
			if r.MaxTimeLag > laggingAfterSec {
				r.State = "Lagging"
			}
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b groupRow) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.QueueName, b.QueueName)
	})
	return out
}

// listGroups is GET /api/v1/consumer-groups[?limit=&cursor=], paged by
// (group, queue); the next cursor is in the header (the answer is an
// array).
func (s *Server) listGroups(ctx *fasthttp.RequestCtx) error {
	p, err := readPage(ctx, defaultPageLimit, maxPageLimit)
	if err != nil {
		return err
	}
	v, qs, err := s.tenantQueuesWithParts(ctx)
	if err != nil {
		return err
	}
	rows, next, err := pageOf(p, s.aclVisibleGroups(ctx, v.tenant, groupRows(v, qs, "")), func(r *groupRow) groupKey { return groupKey{G: r.Name, Q: r.QueueName} }, cmpGroup)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []groupRow{}
	}
	setNextCursor(ctx, next)
	writeJSON(ctx, http.StatusOK, rows)
	return nil
}

// laggingGroups is GET /api/v1/consumer-groups/lagging?minLagSeconds=:
// every (group, partition) whose oldest unconsumed message is older than
// minLagSeconds (default 0), in snake_case as Queen. Lag changes while a
// client pages, so pages follow (group, queue, partition index), which
// does not; each page is sorted most behind first (one page, the usual
// case, is then Queen's order). The next cursor is in the header.
func (s *Server) laggingGroups(ctx *fasthttp.RequestCtx) error {
	minLag, err := intArg(ctx, "minLagSeconds", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	p, err := readPage(ctx, defaultPageLimit, maxPageLimit)
	if err != nil {
		return err
	}
	v, qs, err := s.tenantQueuesWithParts(ctx)
	if err != nil {
		return err
	}
	type row struct {
		Group        string  `json:"consumer_group"`
		Queue        string  `json:"queue_name"`
		Partition    string  `json:"partition_name"`
		PartitionID  string  `json:"partition_id"`
		WorkerID     *string `json:"worker_id"`
		OffsetLag    uint64  `json:"offset_lag"`
		TimeLag      int64   `json:"time_lag_seconds"`
		LagHours     float64 `json:"lag_hours"`
		OldestAt     *string `json:"oldest_unconsumed_at"`
		LastConsumed *string `json:"last_consumed_at"`
		index        uint32
	}
	now := nowMs()
	out := []row{}
	for qi := range qs {
		for pi := range qs[qi].Partitions {
			p := &qs[qi].Partitions[pi]
			for ci := range p.Cursors {
				c := &p.Cursors[ci]
				off, secs := lagOf(v, p, c, now)
				if off == 0 || secs <= int64(minLag) || !s.aclGroupVisible(ctx, v.tenant, c.Group) {
					continue
				}
				out = append(out, row{Group: c.Group, Queue: qs[qi].Name, Partition: p.Name, PartitionID: pidString(p.ID),
					OffsetLag: off, TimeLag: secs, LagHours: float64(secs*100/3600) / 100,
					OldestAt: isoOrNil(now - secs*1000), LastConsumed: isoOrNil(c.UpdatedMs), index: p.Index})
			}
		}
	}
	key := func(r *row) groupKey { return groupKey{G: r.Group, Q: r.Queue, I: int64(r.index)} }
	slices.SortFunc(out, func(a, b row) int { return cmpGroup(key(&a), key(&b)) })
	out, next, err := pageOf(p, out, key, cmpGroup)
	if err != nil {
		return err
	}
	slices.SortStableFunc(out, func(a, b row) int { return cmp.Compare(b.TimeLag, a.TimeLag) })
	setNextCursor(ctx, next)
	writeJSON(ctx, http.StatusOK, out)
	return nil
}

// groupDetail is GET /api/v1/consumer-groups/:group[?limit=&cursor=]: an
// object keyed by queue name, each with the group's partitions (empty
// object for a group that has nothing, as Queen). It pages by (queue,
// partition index); a queue's entry, with its subscription, counts as one
// item before its partitions and comes again on every page holding some of
// them. The next cursor is in the header (queue names are the keys).
func (s *Server) groupDetail(ctx *fasthttp.RequestCtx) error {
	group := pathArg(ctx, "group")
	// Reading and deleting take any existing name: Kafka group ids are
	// free-form, and names from before the character rules must stay
	// reachable.
	if err := checkNameSize("consumerGroup", group); err != nil {
		return err
	}
	p, err := readPage(ctx, defaultPageLimit, maxPageLimit)
	if err != nil {
		return err
	}
	v, qs, err := s.tenantQueuesWithParts(ctx)
	if err != nil {
		return err
	}
	// The group's items in key order: each queue it has, then its
	// partitions there.
	type item struct {
		q *storage.QueueView
		p *storage.PartitionView // nil: the queue's entry
	}
	var items []item
	for qi := range qs {
		q := &qs[qi]
		n := len(items)
		for pi := range q.Partitions {
			if q.Partitions[pi].Cursor(group) != nil {
				items = append(items, item{q, &q.Partitions[pi]})
			}
		}
		if len(items) > n || subscriptionOf(q, group) != nil {
			items = slices.Insert(items, n, item{q: q})
		}
	}
	key := func(it *item) partKey {
		if it.p == nil {
			return partKey{Q: it.q.Name, I: -1}
		}
		return partKey{Q: it.q.Name, I: int64(it.p.Index)}
	}
	items, next, err := pageOf(p, items, key, cmpPart)
	if err != nil {
		return err
	}
	now := nowMs()
	out := map[string]map[string]any{}
	for _, it := range items {
		e := out[it.q.Name]
		if e == nil {
			e = map[string]any{"partitions": []map[string]any{}}
			if sub := subscriptionOf(it.q, group); sub != nil {
				e["subscriptionMode"] = subModeName(sub.Mode)
				e["subscriptionTimestamp"] = subTimestamp(sub)
			}
			out[it.q.Name] = e
		}
		if it.p == nil {
			continue
		}
		c := it.p.Cursor(group)
		off, secs := lagOf(v, it.p, c, now)
		e["partitions"] = append(e["partitions"].([]map[string]any), map[string]any{"partition": it.p.Name,
			"partitionId": pidString(it.p.ID), "workerId": nil,
			"lastConsumedAt": isoOrNil(c.UpdatedMs), "totalConsumed": c.Pos, "offset": c.Pos,
			"highWatermark": it.p.HighWatermark, "offsetLag": off, "timeLagSeconds": secs,
			"leaseActive": c.LeaseExpiresMs > 0, "leaseExpiresAt": isoOrNil(c.LeaseExpiresMs),
			"headFailures": c.HeadFailures, "metadata": c.Metadata})
	}
	setNextCursor(ctx, next)
	writeJSON(ctx, http.StatusOK, out)
	return nil
}

// subscriptionOf is the group's subscription to q, or nil.
func subscriptionOf(q *storage.QueueView, group string) *storage.SubscriptionView {
	for i := range q.Subscriptions {
		if q.Subscriptions[i].Group == group {
			return &q.Subscriptions[i]
		}
	}
	return nil
}

// deleteGroup is DELETE /api/v1/consumer-groups/:group[?deleteMetadata=]
// (admin) and DELETE /api/v1/consumer-groups/:group/queues/:queue. Unlike
// Queen's SQL default, deleteMetadata defaults to true: "delete the group"
// then forgets its subscriptions too; deleteMetadata=false keeps them.
func (s *Server) deleteGroup(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	group, queue := pathArg(ctx, "group"), pathArg(ctx, "queue")
	if err := checkNameSize("consumerGroup", group); err != nil {
		return err
	}
	meta := true
	if v := ctx.QueryArgs().Peek("deleteMetadata"); len(v) > 0 {
		meta = isTrue(v)
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.DeleteGroup(rctx, &wire.DeleteGroupCmd{Tenant: tenant, Group: group, Queue: queue, DeleteMetadata: meta})
	if err != nil {
		return err
	}
	if err := res.Code.Err(); err != nil {
		return err
	}
	ans := map[string]any{"success": true, "consumerGroup": group, "deletedPartitions": res.N, "metadataDeleted": meta}
	if queue != "" {
		ans["queueName"] = queue
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// groupSubscription is POST /api/v1/consumer-groups/:group/subscription
// {"subscriptionTimestamp":"<ISO>"}: every subscription of the group
// starts the partitions it has not read yet at that time.
func (s *Server) groupSubscription(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	group := pathArg(ctx, "group")
	var req struct {
		SubscriptionTimestamp string `json:"subscriptionTimestamp"`
	}
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	ms, err := parseISO(req.SubscriptionTimestamp)
	if err != nil {
		return badRequest("subscriptionTimestamp must be an ISO-8601 timestamp")
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.UpdateSubscription(rctx, &wire.SubscriptionCmd{Tenant: tenant, Group: group, FromMs: ms})
	if err != nil {
		return err
	}
	if err := res.Code.Err(); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"success": true, "consumerGroup": group,
		"newTimestamp": isoMillis(ms), "rowsUpdated": res.N})
	return nil
}

// seekGroup is POST …/:group/queues/:queue/seek and
// …/partitions/:partition/seek with {"toEnd":true} or
// {"timestamp":"<ISO>"}. A partition seek without a body seeks to the end
// (what Queen's dashboard sends); a queue seek needs one of the two.
func (s *Server) seekGroup(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	group, queue, partition := pathArg(ctx, "group"), pathArg(ctx, "queue"), pathArg(ctx, "partition")
	if err := checkNames(queue, group, partition); err != nil {
		return err
	}
	var req struct {
		ToEnd     bool   `json:"toEnd"`
		Timestamp string `json:"timestamp"`
	}
	if len(ctx.PostBody()) > 0 {
		if err := readJSON(ctx, &req); err != nil {
			return err
		}
	} else if partition != "" {
		req.ToEnd = true
	}
	cmd := wire.SeekCmd{Tenant: tenant, Queue: queue, Group: group, Partition: partition, ToEnd: req.ToEnd}
	switch {
	case req.ToEnd:
	case req.Timestamp != "":
		if cmd.TimestampMs, err = parseISO(req.Timestamp); err != nil {
			return badRequest("timestamp must be an ISO-8601 timestamp")
		}
	default:
		return badRequest("give toEnd:true or a timestamp")
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Seek(rctx, &cmd)
	if err != nil {
		return err
	}
	if err := res.Code.Err(); err != nil {
		return err
	}
	ans := map[string]any{"success": true, "consumerGroup": group, "queueName": queue, "seekToEnd": req.ToEnd,
		"targetTimestamp": nil, "partitionsUpdated": res.N}
	if !req.ToEnd {
		ans["targetTimestamp"] = isoMillis(cmd.TimestampMs)
	}
	if partition != "" {
		ans["partitionName"], ans["updated"] = partition, res.N > 0
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}
