package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage/ephemeral"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// Ephemeral queues' HTTP routes (spec §2.15). Partition-scoped requests
// (push, pop, ack) run on the partition's owner (ephemeral_ring.go);
// queue-wide ones (configure, reset, delete, listings) run on every live
// node, since a queue's partitions are spread over them.

const (
	ephMaxMessages = 10000 // per push: the default maxLength
	ephMaxBatch    = 10000
	ephQueueMode   = "__QUEUE_MODE__"
)

const ephNodeHeader = "x-queen-ephemeral-node"

var errEphDisabled = &apiError{http.StatusServiceUnavailable, "ephemeral_disabled",
	"ephemeral queues are switched off (POST /api/v1/system/ephemeral)"}

// ephReq is what every ephemeral route starts with: the tenant (the
// client's, or the one a forwarding peer resolved), whether a peer
// forwarded the request, and the system switch.
type ephReq struct {
	tenant    wire.ID
	hops      int
	forwarded bool
}

func (s *Server) ephBegin(ctx *fasthttp.RequestCtx) (ephReq, error) {
	tenant, hops, fwd, err := s.eph.peerTenant(ctx)
	if err != nil {
		return ephReq{}, err
	}
	if !fwd {
		if tenant, err = s.tenantOf(ctx); err != nil {
			return ephReq{}, err
		}
		if !s.eph.enabled.Load() {
			return ephReq{}, errEphDisabled
		}
		if s.eph.cfg.RequireGrant && !s.ephGranted(tenant) {
			return ephReq{}, errEphNotGranted
		}
	}
	return ephReq{tenant: tenant, hops: hops, forwarded: fwd}, nil
}

// ephBeginJSON is ephBegin, then the body read into dst.
func (s *Server) ephBeginJSON(ctx *fasthttp.RequestCtx, dst any) (ephReq, error) {
	rq, err := s.ephBegin(ctx)
	if err != nil {
		return rq, err
	}
	return rq, readJSON(ctx, dst)
}

// ephRoute runs local on this node when it owns k (or a peer forwarded the
// request here), or relays the request to the owner. ErrMoved from local
// means this node began handing over meanwhile: route again.
func (s *Server) ephRoute(ctx *fasthttp.RequestCtx, rq ephReq, k ephemeral.Key, timeout time.Duration, local func() error) error {
	self := s.eph.cfg.NodeID
	o := s.eph.owner(k, time.Now())
	if rq.forwarded || o == self {
		// Says which node answered: an operator (and the tests) can see
		// where a partition lives.
		ctx.Response.Header.Set(ephNodeHeader, strconv.FormatUint(self, 10))
		err := local()
		if !errors.Is(err, ephemeral.ErrMoved) {
			return storeError(err)
		}
		o = s.eph.owner(k, time.Now())
	}
	if o == 0 || o == self || rq.hops >= maxHops || !s.eph.peerSet()[o] {
		return errUnrouted
	}
	if _, err := s.relay(ctx, o, rq.relayHeader(), timeout, "Retry-After", ephNodeHeader); err != nil {
		return relayFailed(err)
	}
	return nil
}

// relayHeader is what a relayed request carries: the tenant this node
// resolved and one more hop.
func (rq ephReq) relayHeader() http.Header {
	return http.Header{tenancy.Header: {rq.tenant.String()}, hopsHeader: {strconv.Itoa(rq.hops + 1)}}
}

// ephCall runs the client's request, with body, on peer id's node route of
// the same path and query, on behalf of rq's tenant.
func (s *Server) ephCall(ctx *fasthttp.RequestCtx, id uint64, rq ephReq, body []byte) (int, []byte, error) {
	h := rq.relayHeader()
	h.Set("Content-Type", "application/json")
	ans, err := s.callRelayed(ctx, id, h, body, s.cfg.RequestTimeout)
	return ans.status, ans.body, err
}

type ephPushReq struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	Messages  []struct {
		Payload json.RawMessage `json:"payload"`
	} `json:"messages"`
}

func (s *Server) ephPush(ctx *fasthttp.RequestCtx) error {
	var body ephPushReq
	rq, err := s.ephBeginJSON(ctx, &body)
	if err != nil {
		return err
	}
	if body.Partition == "" {
		body.Partition = defaultPartition
	}
	if err := checkNames(body.Queue, body.Partition); err != nil {
		return err
	}
	if len(body.Messages) == 0 || len(body.Messages) > ephMaxMessages {
		return badRequest("messages must hold 1..10000 items")
	}
	payloads := make([][]byte, len(body.Messages))
	for i, m := range body.Messages {
		if len(m.Payload) == 0 {
			return badRequest("messages[" + strconv.Itoa(i) + "].payload is required")
		}
		payloads[i] = m.Payload
	}
	if !rq.forwarded && !s.eph.rate.allow(rq.tenant.String(), len(payloads), time.Now()) {
		return errEphRate
	}
	k := ephemeral.Key{Tenant: rq.tenant.String(), Queue: body.Queue, Partition: body.Partition}
	return s.ephRoute(ctx, rq, k, s.cfg.RequestTimeout, func() error {
		if err := s.eph.store.Push(k, payloads, time.Now()); err != nil {
			return err
		}
		writeJSON(ctx, http.StatusCreated, map[string]int{"pushed": len(payloads)})
		return nil
	})
}

type ephMessage struct {
	ID        string          `json:"id"`
	Partition string          `json:"partition"`
	Payload   json.RawMessage `json:"payload"`
	Attempts  int             `json:"attempts"`
}

func (s *Server) ephPop(ctx *fasthttp.RequestCtx) error {
	rq, err := s.ephBegin(ctx)
	if err != nil {
		return err
	}
	a := ctx.QueryArgs()
	queue, part, group := string(a.Peek("queue")), string(a.Peek("partition")), string(a.Peek("group"))
	if part == "" {
		part = defaultPartition
	}
	if group == "" {
		group = ephQueueMode
	}
	if err := checkNames(queue, part, group); err != nil {
		return err
	}
	batch, err := intArg(ctx, "batch", 1, 1, ephMaxBatch)
	if err != nil {
		return err
	}
	timeoutMs, err := intArg(ctx, "timeout", int(s.cfg.PopDefaultTimeout/time.Millisecond), 0, int(s.cfg.PopMaxTimeout/time.Millisecond))
	if err != nil {
		return err
	}
	leaseS, err := intArg(ctx, "leaseSeconds", 0, 1, 86400)
	if err != nil {
		return err
	}
	wait, commit := isTrue(a.Peek("wait")), isTrue(a.Peek("commitOnDelivery")) || isTrue(a.Peek("autoAck"))
	timeout := time.Duration(timeoutMs) * time.Millisecond
	deadline := time.Now().Add(timeout)
	k := ephemeral.Key{Tenant: rq.tenant.String(), Queue: queue, Partition: part}
	return s.ephRoute(ctx, rq, k, timeout+s.cfg.RequestTimeout, func() error {
		for {
			changed := s.eph.store.Changed()
			got, err := s.eph.store.Pop(k, group, batch, commit, time.Duration(leaseS)*time.Second, time.Now())
			if err != nil {
				return err
			}
			left := time.Until(deadline)
			if len(got) > 0 || !wait || left <= 0 {
				msgs := make([]ephMessage, len(got))
				for i, m := range got {
					msgs[i] = ephMessage{ID: m.ID, Partition: m.Partition, Payload: m.Payload, Attempts: m.Attempts}
				}
				writeJSON(ctx, http.StatusOK, map[string]any{"queue": queue, "messages": msgs})
				return nil
			}
			// Parked: woken by a push or an ack anywhere in the store, by
			// the sweep when a lease expires, by shutdown, or the deadline.
			t := time.NewTimer(left)
			select {
			case <-changed:
			case <-t.C:
			case <-s.base.Done():
			}
			t.Stop()
			if s.base.Err() != nil {
				deadline = time.Now()
			}
		}
	})
}

type ephAck struct {
	ID        string `json:"id"`
	Status    string `json:"status,omitempty"`
	Partition string `json:"partition,omitempty"`
}

type ephAckReq struct {
	Queue     string   `json:"queue"`
	Group     string   `json:"group,omitempty"`
	Partition string   `json:"partition,omitempty"`
	Acks      []ephAck `json:"acks"`
}

type ephAckResult struct {
	Index   int    `json:"index"`
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
}

// ephAckHandler settles acks. An ack is routed by its partition (per ack,
// else the request's, else Default; pops return each message's partition),
// since only the partition's owner knows its messages. Acks for partitions
// with different owners are split, sent on, and answered in input order.
func (s *Server) ephAckHandler(ctx *fasthttp.RequestCtx) error {
	var body ephAckReq
	rq, err := s.ephBeginJSON(ctx, &body)
	if err != nil {
		return err
	}
	if body.Group == "" {
		body.Group = ephQueueMode
	}
	if body.Partition == "" {
		body.Partition = defaultPartition
	}
	if err := checkNames(body.Queue, body.Partition, body.Group); err != nil {
		return err
	}
	if len(body.Acks) == 0 || len(body.Acks) > ephMaxBatch {
		return badRequest("acks must hold 1..10000 items")
	}
	byPart := map[string][]int{}
	for i := range body.Acks {
		a := &body.Acks[i]
		if a.ID == "" {
			return badRequest("acks[" + strconv.Itoa(i) + "].id is required")
		}
		switch a.Status {
		case "", "completed", "success", "acked", "ok":
			a.Status = ephemeral.StatusCompleted
		case ephemeral.StatusFailed, ephemeral.StatusRetry:
		default:
			return badRequest("acks[" + strconv.Itoa(i) + "].status must be completed, failed or retry")
		}
		if a.Partition == "" {
			a.Partition = body.Partition
		}
		if err := checkName("partition", a.Partition); err != nil {
			return err
		}
		byPart[a.Partition] = append(byPart[a.Partition], i)
	}
	out := make([]ephAckResult, len(body.Acks))
	for part, idx := range byPart {
		k := ephemeral.Key{Tenant: rq.tenant.String(), Queue: body.Queue, Partition: part}
		if err := s.ephAckPartition(ctx, rq, k, body, idx, out); err != nil {
			return err
		}
	}
	writeJSON(ctx, http.StatusOK, out)
	return nil
}

// ephAckPartition settles the acks at idx, all of partition k, here or at
// k's owner, filling out.
func (s *Server) ephAckPartition(ctx *fasthttp.RequestCtx, rq ephReq, k ephemeral.Key, body ephAckReq, idx []int, out []ephAckResult) error {
	local := func() error {
		now := time.Now()
		for _, i := range idx {
			a := body.Acks[i]
			res, err := s.eph.store.Ack(k.Tenant, k.Queue, body.Group, a.ID, a.Status, now)
			if err != nil {
				return err
			}
			out[i] = ephAckResult{Index: i, ID: a.ID, Outcome: res}
		}
		return nil
	}
	self := s.eph.cfg.NodeID
	o := s.eph.owner(k, time.Now())
	if rq.forwarded || o == self {
		err := local()
		if !errors.Is(err, ephemeral.ErrMoved) {
			return err
		}
		o = s.eph.owner(k, time.Now())
	}
	if o == 0 || o == self || !s.eph.peerSet()[o] || rq.hops >= maxHops {
		return errUnrouted
	}
	sub := ephAckReq{Queue: k.Queue, Group: body.Group, Partition: k.Partition}
	for _, i := range idx {
		sub.Acks = append(sub.Acks, body.Acks[i])
	}
	b, _ := json.Marshal(sub)
	status, resp, err := s.ephCall(ctx, o, rq, b)
	if err != nil {
		return relayFailed(err)
	}
	var res []ephAckResult
	if status != http.StatusOK || json.Unmarshal(resp, &res) != nil || len(res) != len(idx) {
		return &apiError{http.StatusBadGateway, "peer_error", "the partition's owner answered " + strconv.Itoa(status) + ": " + string(resp)}
	}
	for j, i := range idx {
		out[i] = ephAckResult{Index: i, ID: res[j].ID, Outcome: res[j].Outcome}
	}
	return nil
}

// fanout runs a queue-wide request on every other live node and returns
// their 200 answers; a node that cannot be reached or fails makes it a
// 503, since the request then took effect on only some nodes (every
// queue-wide request is idempotent: retry it).
func (s *Server) fanout(ctx *fasthttp.RequestCtx, rq ephReq, body []byte) ([][]byte, error) {
	if rq.forwarded {
		return nil, nil
	}
	var out [][]byte
	for _, id := range s.eph.live(time.Now()) {
		if id == s.eph.cfg.NodeID {
			continue
		}
		status, resp, err := s.ephCall(ctx, id, rq, body)
		switch {
		case err != nil || status >= 500:
			return nil, &apiError{http.StatusServiceUnavailable, "retry", "ephemeral node " + strconv.FormatUint(id, 10) + " did not answer; the request may have applied on some nodes only"}
		case status == http.StatusOK:
			out = append(out, resp)
		case status != http.StatusNotFound:
			return nil, &apiError{status, "peer_error", string(resp)}
		}
	}
	return out, nil
}

// ephOptionsBody is the public shape of a queue's options.
type ephOptionsBody struct {
	MaxBytes     *int64  `json:"maxBytes,omitempty"`
	MaxLength    *int    `json:"maxLength,omitempty"`
	Policy       *string `json:"policy,omitempty"`
	TTLSeconds   *int64  `json:"ttlSeconds,omitempty"`
	LeaseSeconds *int64  `json:"leaseSeconds,omitempty"`
	RetryLimit   *int    `json:"retryLimit,omitempty"`
	WindowBuffer *int64  `json:"windowBuffer,omitempty"`
}

func optionsBody(o ephemeral.Options) ephOptionsBody {
	ttl, lease, win := int64(o.TTL/time.Second), int64(o.Lease/time.Second), int64(o.WindowBuffer/time.Second)
	return ephOptionsBody{&o.MaxBytes, &o.MaxLength, &o.Policy, &ttl, &lease, &o.RetryLimit, &win}
}

// merge applies the options given over o.
func (b ephOptionsBody) merge(o ephemeral.Options) (ephemeral.Options, error) {
	secs := func(p *int64, d *time.Duration, name string) error {
		if p == nil {
			return nil
		}
		if *p < 0 || *p > 1<<31 {
			return badRequest(name + " must be 0.." + strconv.Itoa(1<<31))
		}
		*d = time.Duration(*p) * time.Second
		return nil
	}
	if b.MaxBytes != nil {
		o.MaxBytes = *b.MaxBytes
	}
	if b.MaxLength != nil {
		o.MaxLength = *b.MaxLength
	}
	if b.Policy != nil {
		o.Policy = *b.Policy
	}
	if b.RetryLimit != nil {
		o.RetryLimit = *b.RetryLimit
	}
	for _, e := range []error{secs(b.TTLSeconds, &o.TTL, "ttlSeconds"), secs(b.LeaseSeconds, &o.Lease, "leaseSeconds"),
		secs(b.WindowBuffer, &o.WindowBuffer, "windowBuffer")} {
		if e != nil {
			return o, e
		}
	}
	return o, storeError(o.Validate())
}

// ephConfigure merges the options over this node's and sends the whole
// result to every live node, so they all hold the same options.
func (s *Server) ephConfigure(ctx *fasthttp.RequestCtx) error {
	var body struct {
		Queue   string          `json:"queue"`
		Options *ephOptionsBody `json:"options"`
	}
	rq, err := s.ephBeginJSON(ctx, &body)
	if err != nil {
		return err
	}
	if err := checkNames(body.Queue); err != nil {
		return err
	}
	if body.Options == nil {
		return badRequest("options is required")
	}
	t := rq.tenant.String()
	o, err := body.Options.merge(s.eph.store.Options(t, body.Queue))
	if err != nil {
		return err
	}
	full, _ := json.Marshal(map[string]any{"queue": body.Queue, "options": optionsBody(o)})
	if _, err := s.fanout(ctx, rq, full); err != nil {
		return err
	}
	if err := s.eph.store.Configure(t, body.Queue, o, time.Now()); err != nil {
		return storeError(err)
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queue": body.Queue, "options": optionsBody(o)})
	return nil
}

func (s *Server) ephReset(ctx *fasthttp.RequestCtx) error {
	var body struct {
		Queue string `json:"queue"`
	}
	rq, err := s.ephBeginJSON(ctx, &body)
	if err != nil {
		return err
	}
	if err := checkNames(body.Queue); err != nil {
		return err
	}
	return s.ephEverywhere(ctx, rq, body.Queue, ctx.PostBody(), "reset", s.eph.store.Reset)
}

func (s *Server) ephDelete(ctx *fasthttp.RequestCtx) error {
	rq, err := s.ephBegin(ctx)
	if err != nil {
		return err
	}
	queue := pathArg(ctx, "queue")
	if err := checkNames(queue); err != nil {
		return err
	}
	return s.ephEverywhere(ctx, rq, queue, nil, "deleted", s.eph.store.Delete)
}

// ephEverywhere runs op on every live node: 404 only if no node knew the
// queue.
func (s *Server) ephEverywhere(ctx *fasthttp.RequestCtx, rq ephReq, queue string, body []byte, what string, op func(tenant, queue string) error) error {
	found := 0
	if err := op(rq.tenant.String(), queue); err == nil {
		found++
	} else if !errors.Is(err, ephemeral.ErrNotFound) {
		return storeError(err)
	}
	answers, err := s.fanout(ctx, rq, body)
	if err != nil {
		return err
	}
	if found+len(answers) == 0 {
		return storeError(ephemeral.ErrNotFound)
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queue": queue, what: true})
	return nil
}

type ephQueueView struct {
	Name       string         `json:"name"`
	Messages   int            `json:"messages"`
	Bytes      int64          `json:"bytes"`
	Leased     int            `json:"leased"`
	Partitions map[string]int `json:"partitions"`
}

// ephGather is a tenant's queues over every live node, merged by name.
func (s *Server) ephGather(ctx *fasthttp.RequestCtx, rq ephReq, only string) ([]ephQueueView, error) {
	views := map[string]*ephQueueView{}
	add := func(v ephQueueView) {
		if only != "" && v.Name != only {
			return
		}
		m := views[v.Name]
		if m == nil {
			m = &ephQueueView{Name: v.Name, Partitions: map[string]int{}}
			views[v.Name] = m
		}
		m.Messages += v.Messages
		m.Bytes += v.Bytes
		m.Leased += v.Leased
		for p, n := range v.Partitions {
			m.Partitions[p] += n
		}
	}
	for _, q := range s.eph.store.Queues(rq.tenant.String(), time.Now()) {
		add(ephQueueView{q.Name, q.Messages, q.Bytes, q.Leased, q.Partitions})
	}
	answers, err := s.fanout(ctx, rq, nil)
	if err != nil {
		return nil, err
	}
	for _, a := range answers {
		var part struct {
			Queues []ephQueueView `json:"queues"`
		}
		if json.Unmarshal(a, &part) == nil {
			for _, v := range part.Queues {
				add(v)
			}
		}
	}
	out := make([]ephQueueView, 0, len(views))
	for _, v := range views {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Server) ephQueues(ctx *fasthttp.RequestCtx) error {
	rq, err := s.ephBegin(ctx)
	if err != nil {
		return err
	}
	qs, err := s.ephGather(ctx, rq, "")
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"queues": qs})
	return nil
}

func (s *Server) ephDepth(ctx *fasthttp.RequestCtx) error {
	rq, err := s.ephBegin(ctx)
	if err != nil {
		return err
	}
	queue := pathArg(ctx, "queue")
	if err := checkNames(queue); err != nil {
		return err
	}
	if rq.forwarded {
		// A peer gathers: answer in the listing's shape.
		return s.ephQueues(ctx)
	}
	qs, err := s.ephGather(ctx, rq, queue)
	if err != nil {
		return err
	}
	if len(qs) == 0 {
		return storeError(ephemeral.ErrNotFound)
	}
	q := qs[0]
	writeJSON(ctx, http.StatusOK, map[string]any{"queue": queue, "depth": q.Messages, "leased": q.Leased,
		"bytes": q.Bytes, "partitions": q.Partitions})
	return nil
}

func (s *Server) ephSystemGet(ctx *fasthttp.RequestCtx) error {
	st := s.eph.store.Stats()
	writeJSON(ctx, http.StatusOK, map[string]any{"enabled": s.eph.enabled.Load(), "bytes": st.Bytes,
		"maxBytes": s.eph.cfg.Store.MaxBytes, "messages": st.Messages, "dropped": st.Dropped, "rejected": st.Rejected,
		"node": s.eph.cfg.NodeID, "live": s.eph.live(time.Now())})
	return nil
}

// ephSystemSet flips the switch on every node: in raft first, so it
// survives restarts, then here at once, on the live peers by an immediate
// probe, on the rest when they next probe or read it from raft.
func (s *Server) ephSystemSet(ctx *fasthttp.RequestCtx) error {
	var body struct {
		Enabled *bool `json:"enabled"`
	}
	if err := readJSON(ctx, &body); err != nil {
		return err
	}
	if body.Enabled == nil {
		return badRequest("enabled (true or false) is required")
	}
	sw := ephSwitch{Enabled: *body.Enabled, Stamp: time.Now().UnixNano()}
	if s.engine != nil {
		b, _ := json.Marshal(sw)
		if err := s.systemPut(ephSwitchKey, b); err != nil {
			return err
		}
	}
	s.eph.setSwitch(sw.Enabled, sw.Stamp)
	return s.ephSystemGet(ctx)
}

// Node-to-node routes (spec §2.3 78-80), served on the node channel only
// (node.go): the raft token, never a JWT.

func (s *Server) ephReady(ctx *fasthttp.RequestCtx) error {
	var m readyMsg
	if err := readJSON(ctx, &m); err != nil {
		return err
	}
	s.eph.heard(m, time.Now())
	writeJSON(ctx, http.StatusOK, s.eph.readyMsg())
	return nil
}

func (s *Server) ephLeaving(ctx *fasthttp.RequestCtx) error {
	return s.ephReady(ctx) // the message says leaving; the answer is ignored
}

func (s *Server) ephAdopt(ctx *fasthttp.RequestCtx) error {
	var req adoptReq
	if err := readJSON(ctx, &req); err != nil {
		return err
	}
	accepted, lost, err := s.eph.store.Adopt(req.Dumps, time.Now())
	if err != nil {
		return &apiError{http.StatusServiceUnavailable, "retry", "this node is leaving too"}
	}
	writeJSON(ctx, http.StatusOK, adoptAnswer{Accepted: accepted, Lost: lost})
	return nil
}
