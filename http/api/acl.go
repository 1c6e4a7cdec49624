package api

import (
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// ACLs on the HTTP door (issue 36, docs/security.md "ACLs on the HTTP
// door"). With QUEEN_ACLS on, every route but the public ones asks the
// authorizer whether the request's principal may do the route's operation
// on the queue (topic), consumer group or cluster it names; acl_routes.go
// is the table. The JWT level check (auth.go) has run first and stays a
// ceiling: an ACL only ever takes away. With ACLs off s.acl is nil and the
// whole cost is that nil check.

// errACLDenied is the sentinel of every ACL refusal: 403 acl_denied
// (errors.go). A refused request has changed nothing.
var errACLDenied = errors.New("acl: denied")

// anonymousPrincipal is a request that carries no credential (JWT off).
const anonymousPrincipal = acl.Anonymous

// proxiedPrincipalKey is where the embedded proxy names the principal of
// the credential it authenticated (ProxiedPrincipal).
const proxiedPrincipalKey = "queen.proxied-principal"

// ProxiedPrincipal tells the API which ACL principal a request the
// embedded proxy hands in acts as (acl.PrincipalForAPIKey for an API key),
// so one key is one principal on both doors. Unset: User:ANONYMOUS.
func ProxiedPrincipal(ctx *fasthttp.RequestCtx, principal string) {
	ctx.SetUserValue(proxiedPrincipalKey, principal)
}

// aclPrincipal is who the request acts as: the proxy's key, the JWT's
// subject, or anonymous.
func aclPrincipal(ctx *fasthttp.RequestCtx) string {
	if _, ok := proxiedTenant(ctx); ok {
		if p, ok := ctx.UserValue(proxiedPrincipalKey).(string); ok && p != "" {
			return p
		}
		return anonymousPrincipal
	}
	if p, ok := principalOf(ctx); ok {
		return acl.PrincipalForJWT(p.Subject)
	}
	return anonymousPrincipal
}

// aclTenant is the tenant as the authorizer keys it.
func aclTenant(t wire.ID) string { return t.String() }

// aclAllowed asks the authorizer; true when ACLs are off, for a request
// relayed by a peer over the node channel (the node the client called
// checked it, and the relay carries no credential), and for the embedded
// proxy's own calls (ProxiedSystem).
func (s *Server) aclAllowed(ctx *fasthttp.RequestCtx, tenant wire.ID, res acl.ResourceType, name string, op acl.Operation) bool {
	if s.acl == nil || fromPeer(ctx) || proxiedSystem(ctx) {
		return true
	}
	return s.acl.Allowed(acl.Request{Tenant: aclTenant(tenant), Principal: aclPrincipal(ctx),
		Host: ctx.RemoteIP().String(), Resource: res, Name: name, Op: op})
}

// aclCheck is nil when the request may do op on the resource, else the
// refusal naming what was refused (the client named it; nothing leaks).
func (s *Server) aclCheck(ctx *fasthttp.RequestCtx, tenant wire.ID, res acl.ResourceType, name string, op acl.Operation) error {
	if s.aclAllowed(ctx, tenant, res, name, op) {
		return nil
	}
	return fmt.Errorf("%w: %s may not %s %s %q", errACLDenied, aclPrincipal(ctx), op, res, name)
}

// aclTopicGroup checks op on queue and on group: a pop, an ack, a
// position. With ACLs off it costs the nil check.
func (s *Server) aclTopicGroup(ctx *fasthttp.RequestCtx, tenant wire.ID, queue, group string, op acl.Operation) error {
	if s.acl == nil {
		return nil
	}
	if err := s.aclCheck(ctx, tenant, acl.ResourceTopic, queue, op); err != nil {
		return err
	}
	return s.aclCheck(ctx, tenant, acl.ResourceGroup, firstNonEmpty(group, wire.QueueModeGroup), op)
}

// aclPush checks WRITE on every queue a push names, before anything is
// written: one refused queue refuses the whole push.
func (s *Server) aclPush(ctx *fasthttp.RequestCtx, tenant wire.ID, items []pushItem) error {
	if s.acl == nil {
		return nil
	}
	seen := map[string]bool{}
	for i := range items {
		q := items[i].Queue
		if seen[q] {
			continue
		}
		seen[q] = true
		if err := s.aclCheck(ctx, tenant, acl.ResourceTopic, q, acl.OpWrite); err != nil {
			return err
		}
	}
	return nil
}

// aclAcks checks READ on the queue (found by the partition id) and on the
// consumer group of every acknowledgment. A partition this node does not
// know is refused: the check fails closed rather than let an ack through
// unchecked.
func (s *Server) aclAcks(ctx *fasthttp.RequestCtx, tenant wire.ID, group string, items []ackItem) error {
	if s.acl == nil {
		return nil
	}
	for i := range items {
		it := &items[i]
		queue := s.queueOfPartition(tenant, uint64(it.PartitionID))
		if err := s.aclTopicGroup(ctx, tenant, queue, firstNonEmpty(it.ConsumerGroup, group), acl.OpRead); err != nil {
			return err
		}
	}
	return nil
}

// queueOfPartition is the name of the queue holding partition pid on this
// node's replicas, "" when unknown (no ACL names the empty queue, so an
// unknown partition is refused).
func (s *Server) queueOfPartition(tenant wire.ID, pid uint64) string {
	if s.engine == nil {
		return ""
	}
	if p, ok := s.engine.PartitionByID(tenant, pid); ok {
		return p.Queue
	}
	return ""
}

// aclTimers checks WRITE on the queue of every timer operation: a timer
// pushes into its queue when it fires, and a cancel takes that back.
func (s *Server) aclTimers(ctx *fasthttp.RequestCtx, tenant wire.ID, ops []timerOpRequest) error {
	if s.acl == nil {
		return nil
	}
	for i := range ops {
		if err := s.aclCheck(ctx, tenant, acl.ResourceTopic, ops[i].Queue, acl.OpWrite); err != nil {
			return err
		}
	}
	return nil
}

// aclFetch checks READ on every queue a fetch reads.
func (s *Server) aclFetch(ctx *fasthttp.RequestCtx, tenant wire.ID, entries []fetchEntry) error {
	if s.acl == nil {
		return nil
	}
	for i := range entries {
		if err := s.aclCheck(ctx, tenant, acl.ResourceTopic, entries[i].Queue, acl.OpRead); err != nil {
			return err
		}
	}
	return nil
}

// aclTxn checks each operation of a transaction as the route of its kind:
// pushes WRITE, acks and positions READ on queue and group, KV WRITE on the
// cluster, timers WRITE on their queue. Refused, nothing commits.
func (s *Server) aclTxn(ctx *fasthttp.RequestCtx, tenant wire.ID, req *txnRequest) error {
	if s.acl == nil {
		return nil
	}
	for i := range req.Operations {
		op := &req.Operations[i]
		var err error
		switch op.Type {
		case "push":
			err = s.aclPush(ctx, tenant, op.Items)
		case "ack": // any other type is refused by the plan
			err = s.aclAcks(ctx, tenant, "", []ackItem{op.ackItem})
		}
		if err != nil {
			return err
		}
	}
	for i := range req.Positions {
		p := &req.Positions[i]
		if err := s.aclTopicGroup(ctx, tenant, p.Queue, p.ConsumerGroup, acl.OpRead); err != nil {
			return err
		}
	}
	if len(req.KV) > 0 {
		if err := s.aclCheck(ctx, tenant, acl.ResourceCluster, acl.ClusterName, acl.OpWrite); err != nil {
			return err
		}
	}
	return s.aclTimers(ctx, tenant, req.Timers)
}

// aclVisibleQueues leaves out the queues the principal may not DESCRIBE:
// every listing and view built on queueViews shows only those.
func (s *Server) aclVisibleQueues(ctx *fasthttp.RequestCtx, tenant wire.ID, qs []storage.QueueView) []storage.QueueView {
	if s.acl == nil || fromPeer(ctx) {
		return qs
	}
	out := make([]storage.QueueView, 0, len(qs)) // qs may be shared: never filtered in place
	for i := range qs {
		if s.aclAllowed(ctx, tenant, acl.ResourceTopic, qs[i].Name, acl.OpDescribe) {
			out = append(out, qs[i])
		}
	}
	return out
}

// aclVisibleGroups leaves out the consumer-group rows whose group the
// principal may not DESCRIBE.
func (s *Server) aclVisibleGroups(ctx *fasthttp.RequestCtx, tenant wire.ID, rows []groupRow) []groupRow {
	if s.acl == nil || fromPeer(ctx) {
		return rows
	}
	out := make([]groupRow, 0, len(rows))
	for i := range rows {
		if s.aclAllowed(ctx, tenant, acl.ResourceGroup, rows[i].Name, acl.OpDescribe) {
			out = append(out, rows[i])
		}
	}
	return out
}

// aclPopFilter is the discovery pop's filter of candidate queues (READ),
// nil with ACLs off.
func (s *Server) aclPopFilter(ctx *fasthttp.RequestCtx, tenant wire.ID) func(queue string) bool {
	if s.acl == nil {
		return nil
	}
	return func(queue string) bool { return s.aclAllowed(ctx, tenant, acl.ResourceTopic, queue, acl.OpRead) }
}

// aclGroupVisible reports whether the principal may DESCRIBE group
// (always, with ACLs off).
func (s *Server) aclGroupVisible(ctx *fasthttp.RequestCtx, tenant wire.ID, group string) bool {
	return s.aclAllowed(ctx, tenant, acl.ResourceGroup, group, acl.OpDescribe)
}

// aclPositions checks READ on the queue and group of every position
// written or read, as Kafka's OffsetCommit and OffsetFetch do.
func (s *Server) aclPositions(ctx *fasthttp.RequestCtx, tenant wire.ID, group string, writes []positionWrite, reads []positionRead) error {
	if s.acl == nil {
		return nil
	}
	for i := range writes {
		if err := s.aclTopicGroup(ctx, tenant, writes[i].Queue, firstNonEmpty(writes[i].ConsumerGroup, group), acl.OpRead); err != nil {
			return err
		}
	}
	for i := range reads {
		if err := s.aclTopicGroup(ctx, tenant, reads[i].Queue, firstNonEmpty(reads[i].ConsumerGroup, group), acl.OpRead); err != nil {
			return err
		}
	}
	return nil
}
