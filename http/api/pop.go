package api

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

type popMessage struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	TraceID         *string         `json:"traceId"`
	Data            json.RawMessage `json:"data"`
	Encoding        string          `json:"encoding,omitempty"`
	Key             json.RawMessage `json:"key,omitempty"`
	KeyEncoding     string          `json:"keyEncoding,omitempty"`
	Headers         []kafkaHeader   `json:"headers,omitempty"`
	ProducerSub     *string         `json:"producerSub"`
	CreatedAt       string          `json:"createdAt"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	Offset          uint64          `json:"offset"`
	LeaseID         *string         `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt uint32          `json:"deliveryAttempt"`
}

type popAnswer struct {
	Success           bool         `json:"success"`
	Queue             string       `json:"queue"`
	Partition         string       `json:"partition"`
	PartitionID       string       `json:"partitionId"`
	LeaseID           *string      `json:"leaseId"`
	ConsumerGroup     string       `json:"consumerGroup"`
	Messages          []popMessage `json:"messages"`
	PartitionsClaimed int          `json:"partitionsClaimed"`
}

// popParams are a pop's query parameters (spec §2.5).
type popParams struct {
	batch            uint32
	partitions       int
	wait             bool
	timeout          time.Duration
	leaseMs          uint32
	group            string
	subMode          uint8
	subFromMs        int64
	commitOnDelivery bool
	// mayRead filters a discovery pop's queues by ACL (nil: ACLs off).
	mayRead func(queue string) bool
}

func (s *Server) popQueue(ctx *fasthttp.RequestCtx) error {
	return s.pop(ctx, pathArg(ctx, "queue"), "")
}

func (s *Server) popPartition(ctx *fasthttp.RequestCtx) error {
	return s.pop(ctx, pathArg(ctx, "queue"), pathArg(ctx, "partition"))
}

func (s *Server) parsePopParams(args *fasthttp.Args) (popParams, error) {
	p := popParams{batch: 1, partitions: 1, timeout: s.cfg.PopDefaultTimeout, group: wire.QueueModeGroup, subMode: s.cfg.DefaultSubscription}
	if v := args.Peek("batch"); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 32)
		if err != nil || n < 1 || n > storage.MaxPopBatch {
			return p, badRequest("batch must be 1.." + strconv.Itoa(storage.MaxPopBatch))
		}
		p.batch = uint32(n)
	}
	if v := args.Peek("partitions"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > wire.MaxPopPartitions {
			return p, badRequest("partitions must be 1..64")
		}
		p.partitions = n
	}
	p.wait = isTrue(args.Peek("wait"))
	if v := args.Peek("timeout"); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 32)
		if err != nil {
			return p, badRequest("timeout must be milliseconds")
		}
		p.timeout = min(time.Duration(n)*time.Millisecond, s.cfg.PopMaxTimeout)
	}
	if v := args.Peek("leaseSeconds"); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 32)
		if err != nil || n < 1 || n > maxLeaseSeconds {
			return p, badRequest("leaseSeconds must be 1..604800")
		}
		p.leaseMs = uint32(n) * 1000
	}
	if v := args.Peek("consumerGroup"); len(v) > 0 {
		p.group = string(v)
	}
	switch v := string(args.Peek("subscriptionMode")); v {
	case "":
	case "new", "new-only":
		p.subMode = wire.SubNew
	default:
		p.subMode = wire.SubAll
	}
	if v := string(args.Peek("subscriptionFrom")); v != "" {
		p.subMode = wire.SubFrom
		if v == "now" {
			p.subFromMs = s.engine.NowMs()
		} else {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return p, badRequest("subscriptionFrom must be an ISO timestamp or now")
			}
			p.subFromMs = t.UnixMilli()
		}
	}
	p.commitOnDelivery = isTrue(args.Peek("commitOnDelivery")) || isTrue(args.Peek("autoAck"))
	return p, nil
}

func isTrue(v []byte) bool {
	switch strings.ToLower(string(v)) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}

// pop is GET /api/v1/pop/queue/:queue[/partition/:partition]. With
// wait=true an empty pop parks (longpoll.go) until the apply loop reports a
// change to the queue, a lease of the group there expires or held-back
// messages become visible, then tries again, until the timeout.
func (s *Server) pop(ctx *fasthttp.RequestCtx, queue, partition string) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	p, err := s.parsePopParams(ctx.QueryArgs())
	if err != nil {
		return err
	}
	if err := checkNames(queue, partition, p.group); err != nil {
		return err
	}
	if partition != "" {
		p.partitions = 1
	}
	deadline := time.Now().Add(p.timeout)
	var backoff time.Duration
	release := func() {}
	for {
		res, err := s.popOnce(tenant, queue, partition, &p)
		release()
		if err != nil {
			return err
		}
		if len(res.Claims) > 0 || !p.wait {
			return s.answerPop(ctx, tenant, queue, &p, res)
		}
		var ok bool
		if release, ok = s.parkUntilPoppable(tenant, queue, partition, p.group, deadline, backoff); !ok {
			return s.answerPop(ctx, tenant, queue, &p, res)
		}
		// The store said yes and the pop found nothing (a racing consumer
		// took the messages): look again less eagerly.
		backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
	}
}

// popDiscover is GET /api/v1/pop?namespace=&task= (spec §2.5): a pop from
// whichever queue labelled so has messages for the group. The queues are
// tried from a random one on, each only when this node's replicas say it
// could deliver, so an idle label costs no proposal. It never long-polls,
// and its lease is 60 s unless leaseSeconds says otherwise.
func (s *Server) popDiscover(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	args := ctx.QueryArgs()
	namespace, task := string(args.Peek("namespace")), string(args.Peek("task"))
	if namespace == "" && task == "" {
		return badRequest("namespace or task is required")
	}
	p, err := s.parsePopParams(args)
	if err != nil {
		return err
	}
	if err := checkName("consumerGroup", p.group); err != nil {
		return err
	}
	p.wait = false
	p.mayRead = s.aclPopFilter(ctx, tenant)
	if p.leaseMs == 0 {
		p.leaseMs = discoveryLeaseMs
	}
	// Once from this node's replicas; when they have nothing, once more
	// after catching up on every group of the tenant, so a queue labelled
	// or pushed to through another node a moment ago is found (as a pop of
	// one queue does, raftgroups.Engine.Pop).
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			rctx, cancel := s.requestCtx(raftgroups.CatchUpWait)
			err := s.engine.CatchUpTenant(rctx, tenant)
			cancel()
			if err != nil {
				return err
			}
		}
		queue, res, err := s.popLabelled(tenant, namespace, task, &p)
		if err != nil {
			return err
		}
		if len(res.Claims) > 0 {
			return s.answerPop(ctx, tenant, queue, &p, res)
		}
	}
	ctx.SetStatusCode(http.StatusNoContent)
	return nil
}

// popLabelled pops from the first queue labelled namespace and task, from
// a random one on, that delivers; each only tried when this node's
// replicas say it could.
func (s *Server) popLabelled(tenant wire.ID, namespace, task string, p *popParams) (string, wire.PopResult, error) {
	queues := s.engine.QueuesLabelled(tenant, namespace, task)
	first := 0
	if len(queues) > 1 {
		first = rand.IntN(len(queues))
	}
	for i := range queues {
		queue := queues[(first+i)%len(queues)]
		if p.mayRead != nil && !p.mayRead(queue) || !s.engine.MayPop(tenant, queue, p.group, "", s.engine.NowMs()) {
			continue
		}
		res, err := s.popOnce(tenant, queue, "", p)
		if err != nil || len(res.Claims) > 0 {
			return queue, res, err
		}
	}
	return "", wire.PopResult{}, nil
}

// discoveryLeaseMs is the discovery pop's lease (spec §2.5).
const discoveryLeaseMs = 60_000

func (s *Server) popOnce(tenant wire.ID, queue, partition string, p *popParams) (wire.PopResult, error) {
	c := wire.PopCmd{
		Tenant: tenant, Queue: queue, Partition: partition, Group: p.group, Batch: p.batch, LeaseMs: p.leaseMs,
		SubMode: p.subMode, SubFromMs: p.subFromMs, CommitOnDelivery: p.commitOnDelivery, StartHint: rand.Uint32(),
	}
	if p.commitOnDelivery {
		c.MaxPartitions = uint32(p.partitions)
	} else {
		// One id in every slot asks for a shared lease (docs/http-api.md,
		// "Shared leases"): every partition the pop claims is leased under
		// it, as Queen does, and one extend renews them all. partitions=1
		// has one slot: its own lease.
		id := wire.ID(uuid.New())
		c.LeaseIDs = make([]wire.ID, p.partitions)
		for i := range c.LeaseIDs {
			c.LeaseIDs[i] = id
		}
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Pop(rctx, &c)
	if err != nil {
		return res, err
	}
	switch res.Code {
	case wire.CodeOK, wire.CodeQueueNotFound:
		return res, nil // a queue that does not exist yet simply has nothing to pop
	}
	return res, res.Code.Err()
}

// answerPop reads the claimed messages from this node's replica of each
// claim's group (the pop was applied here before it returned) and renders
// them. A claim's partition id names its group.
func (s *Server) answerPop(ctx *fasthttp.RequestCtx, tenant wire.ID, queue string, p *popParams, res wire.PopResult) error {
	if len(res.Claims) == 0 {
		ctx.SetStatusCode(http.StatusNoContent)
		return nil
	}
	ans := popAnswer{Success: true, Queue: queue, ConsumerGroup: p.group, PartitionsClaimed: len(res.Claims), Messages: []popMessage{}}
	// One reader per store the claims are in (the groups of the queue):
	// it keeps its iterators from one partition to the next.
	readers := map[*storage.Store]*storage.RangeReader{}
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	for ci := range res.Claims {
		cl := &res.Claims[ci]
		var leaseID *string
		if !cl.LeaseID.IsZero() {
			id := cl.LeaseID.String()
			leaseID = &id
		}
		pid := strconv.FormatUint(cl.PartitionID, 10)
		if ci == 0 {
			ans.Partition, ans.PartitionID, ans.LeaseID = cl.Partition, pid, leaseID
		}
		part, ok := s.engine.PartitionByID(tenant, cl.PartitionID)
		if !ok {
			continue
		}
		st := part.Store()
		r := readers[st]
		if r == nil {
			var err error
			if r, err = st.NewRangeReader(); err != nil {
				return err
			}
			readers[st] = r
		}
		var rerr error
		// Read as a lease: the ack that follows resolves its messages from
		// what this read saw (storage.ReadLease).
		err := r.ReadLease(part, cl.LeaseID, cl.From, cl.To, func(off uint64, appendMs int64, body []byte) bool {
			rec, err := wire.ParseRecord(body)
			if err != nil {
				rerr = err
				return false
			}
			s.engine.OpenRecord(&rec)
			m := popMessage{
				ID: rec.MsgID.String(), TransactionID: txnIDOf(&rec), TraceID: optString(rec.TraceID),
				ProducerSub: optString(rec.ProducerSub), CreatedAt: isoMillis(appendMs), PartitionID: pid,
				Partition: cl.Partition, Offset: off, LeaseID: leaseID, ConsumerGroup: p.group,
				DeliveryAttempt: cl.DeliveryAttempt(off),
			}
			v := viewOf(&rec)
			m.Data, m.Encoding, m.Key, m.KeyEncoding, m.Headers = v.value, v.encoding, v.key, v.keyEncoding, v.headers
			ans.Messages = append(ans.Messages, m)
			return true
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
	}
	writeJSON(ctx, http.StatusOK, ans)
	s.traffic.popped(len(ans.Messages), len(ctx.Response.Body()))
	return nil
}
