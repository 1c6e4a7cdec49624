package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// ACL enforcement on the Kafka door (QUEEN_ACLS=true, docs/acls.md): each
// request is checked as Kafka's authorizer checks it, per request and per
// resource named in it (never per record), after the JWT role ceiling
// (guard) has let it through, so an ACL never grants above a token's
// role. With ACLs off the wrapper is not installed at all.

// aclPrincipalOf is the ACL principal of a connection, the same for the
// same credentials on both doors: an embedded proxy API key's, a JWT's
// subject (OAUTHBEARER, or a broker JWT as the PLAIN password), a SASL
// user's, User:ANONYMOUS without a login.
func aclPrincipalOf(c *kafka.Conn) string {
	p, ok := c.Principal()
	if !ok {
		return acl.Anonymous
	}
	if id, ok := p.Identity.(Identity); ok {
		switch {
		case id.ACLPrincipal != "":
			return id.ACLPrincipal
		case id.Principal != nil:
			return acl.PrincipalForJWT(id.Principal.Subject)
		}
	}
	if p.User == "" {
		return acl.Anonymous
	}
	return acl.PrincipalUser(p.User)
}

// aclCaller asks the authorizer about one request's caller.
type aclCaller struct {
	a *acl.Authorizer
	r acl.Request
}

func (b *Broker) aclCallerOf(c *kafka.Conn) aclCaller {
	return aclCaller{a: b.cfg.ACL, r: acl.Request{Tenant: aclTenant(b.tenantOf(c)), Principal: aclPrincipalOf(c), Host: c.IP()}}
}

// defaultTenantText is the default tenant's text, made once: most
// requests are the default tenant's, and a decision should not allocate.
var defaultTenantText = wire.DefaultTenant.String()

// aclTenant is a tenant as ACL requests name it (wire.ID's text form).
func aclTenant(id wire.ID) string {
	if id == wire.DefaultTenant {
		return defaultTenantText
	}
	return id.String()
}

func (k aclCaller) may(rt acl.ResourceType, name string, op acl.Operation) bool {
	r := k.r
	r.Resource, r.Name, r.Op = rt, name, op
	return k.a.Allowed(r)
}

// allowed says whether c may do op on the resource: always with ACLs off.
func (b *Broker) allowed(c *kafka.Conn, rt acl.ResourceType, name string, op acl.Operation) bool {
	if !b.cfg.ACL.Enabled() {
		return true
	}
	return b.aclCallerOf(c).may(rt, name, op)
}

// aclMayCreate says whether c may create topic automatically (Metadata,
// Produce) as far as ACLs go: as Kafka, DESCRIBE on the topic (a topic
// the caller may not describe is refused before anything else) and
// CREATE on the cluster or the topic; always with ACLs off. The JWT role
// check (mayCreateTopics) comes first.
func (b *Broker) aclMayCreate(c *kafka.Conn, topic string) bool {
	if !b.cfg.ACL.Enabled() {
		return true
	}
	k := b.aclCallerOf(c)
	return k.may(acl.ResourceTopic, topic, acl.OpDescribe) &&
		(k.may(acl.ResourceCluster, acl.ClusterName, acl.OpCreate) || k.may(acl.ResourceTopic, topic, acl.OpCreate))
}

// Refusal codes per resource type.
var aclCodes = [...]int16{
	acl.ResourceTopic:           kerr.TopicAuthorizationFailed.Code,
	acl.ResourceGroup:           kerr.GroupAuthorizationFailed.Code,
	acl.ResourceCluster:         kerr.ClusterAuthorizationFailed.Code,
	acl.ResourceTransactionalID: kerr.TransactionalIDAuthorizationFailed.Code,
}

// aclNeeds collects a request's checks; the first refused gives the code.
type aclNeeds struct {
	k    aclCaller
	code int16
}

func (n *aclNeeds) need(rt acl.ResourceType, name string, op acl.Operation) {
	if n.code == 0 && !n.k.may(rt, name, op) {
		n.code = aclCodes[rt]
	}
}

// topic needs op on a topic; an empty name (an id no topic has) is left
// to the handler's UNKNOWN_TOPIC_ID.
func (n *aclNeeds) topic(name string, op acl.Operation) {
	if name != "" {
		n.need(acl.ResourceTopic, name, op)
	}
}
func (n *aclNeeds) group(name string, op acl.Operation) { n.need(acl.ResourceGroup, name, op) }
func (n *aclNeeds) txn(id string, op acl.Operation)     { n.need(acl.ResourceTransactionalID, id, op) }
func (n *aclNeeds) cluster(op acl.Operation)            { n.need(acl.ResourceCluster, acl.ClusterName, op) }

// topicOrCluster needs op on the topic or on the cluster (Kafka's CREATE).
func (n *aclNeeds) topicOrCluster(name string, op acl.Operation) {
	if n.code == 0 && !n.k.may(acl.ResourceCluster, acl.ClusterName, op) && !n.k.may(acl.ResourceTopic, name, op) {
		n.code = kerr.TopicAuthorizationFailed.Code
	}
}

// aclGuarded wraps a handler with the ACL checks of its key. Produce,
// Metadata, the listing requests of acl_partial.go and the group,
// transaction and share-group requests of acl_offsets.go and
// acl_shares.go answer per item (refused ones get the error, the others
// are served); ListGroups and ListTransactions leave out what the caller
// may not describe; the others are refused whole with the first refused
// resource's error.
func (b *Broker) aclGuarded(key int16, h kafka.Handler) kafka.Handler {
	if !b.cfg.ACL.Enabled() {
		return h
	}
	return func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
		k := b.aclCallerOf(c)
		switch r := req.(type) {
		case *kmsg.ProduceRequest:
			return b.aclProduce(ctx, c, k, r, h)
		case *kmsg.MetadataRequest:
			return aclMetadata(ctx, c, k, r, h)
		case *kmsg.ListGroupsRequest:
			return aclListGroups(ctx, c, k, r, h)
		case *kmsg.ListTransactionsRequest:
			return aclListTransactions(ctx, c, k, r, h)
		case *kmsg.DescribeACLsRequest, *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest:
			return h(ctx, c, req) // the handlers check the cluster themselves
		}
		if resp, served, err := b.aclServePartial(ctx, c, k, req, h); served {
			return resp, err
		}
		n := aclNeeds{k: k}
		b.aclCheck(&n, c, req)
		if n.code != 0 {
			return kafka.ErrorResponse(req, n.code), nil
		}
		return h(ctx, c, req)
	}
}

// aclCheck lists what each request needs, as Kafka's KafkaApis does. The
// keys acl_partial.go answers per item are here too, so this stays the
// whole table (TestEveryKeyHasAnACLRule walks it).
func (b *Broker) aclCheck(n *aclNeeds, c *kafka.Conn, req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			n.topic(b.aclTopicName(c, t.Topic, t.TopicID), acl.OpRead)
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpDescribe)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpDescribe)
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpDescribe)
		}
	case *kmsg.DescribeProducersRequest:
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpRead)
		}
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			n.topicOrCluster(t.Topic, acl.OpCreate)
		}
	case *kmsg.DeleteTopicsRequest:
		for _, name := range r.TopicNames {
			n.topic(name, acl.OpDelete)
		}
		for _, t := range r.Topics {
			if t.Topic != nil {
				n.topic(*t.Topic, acl.OpDelete)
			} else {
				n.topic(b.aclTopicName(c, "", t.TopicID), acl.OpDelete)
			}
		}
	case *kmsg.DeleteRecordsRequest:
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpDelete)
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpAlter)
		}
	case *kmsg.DescribeConfigsRequest:
		for _, res := range r.Resources {
			aclConfigResource(n, res.ResourceType, res.ResourceName, acl.OpDescribeConfigs)
		}
	case *kmsg.AlterConfigsRequest:
		for _, res := range r.Resources {
			aclConfigResource(n, res.ResourceType, res.ResourceName, acl.OpAlterConfigs)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		for _, res := range r.Resources {
			aclConfigResource(n, res.ResourceType, res.ResourceName, acl.OpAlterConfigs)
		}
	case *kmsg.DescribeLogDirsRequest, *kmsg.DescribeClusterRequest:
		n.cluster(acl.OpDescribe)
	case *kmsg.ElectLeadersRequest, *kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.AlterPartitionAssignmentsRequest:
		n.cluster(acl.OpAlter)
	case *kmsg.DescribeUserSCRAMCredentialsRequest, *kmsg.ListPartitionReassignmentsRequest:
		n.cluster(acl.OpDescribe)
	case *kmsg.DescribeClientQuotasRequest:
		n.cluster(acl.OpDescribeConfigs)
	case *kmsg.AlterClientQuotasRequest:
		n.cluster(acl.OpAlterConfigs)

	case *kmsg.FindCoordinatorRequest:
		keys := r.CoordinatorKeys
		if r.Version < 4 {
			keys = []string{r.CoordinatorKey}
		}
		for _, key := range keys {
			if r.CoordinatorType == 1 {
				n.txn(key, acl.OpDescribe)
			} else {
				n.group(key, acl.OpDescribe)
			}
		}
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 {
			n.group(r.Group, acl.OpDescribe)
			for _, t := range r.Topics {
				n.topic(t.Topic, acl.OpDescribe)
			}
		}
		for _, g := range r.Groups {
			n.group(g.Group, acl.OpDescribe)
			for _, t := range g.Topics {
				n.topic(t.Topic, acl.OpDescribe)
			}
		}
	case *kmsg.OffsetCommitRequest:
		n.group(r.Group, acl.OpRead)
		for _, t := range r.Topics {
			n.topic(b.aclTopicName(c, t.Topic, t.TopicID), acl.OpRead)
		}
	case *kmsg.JoinGroupRequest:
		n.group(r.Group, acl.OpRead)
	case *kmsg.SyncGroupRequest:
		n.group(r.Group, acl.OpRead)
	case *kmsg.HeartbeatRequest:
		n.group(r.Group, acl.OpRead)
	case *kmsg.LeaveGroupRequest:
		n.group(r.Group, acl.OpRead)
	case *kmsg.DescribeGroupsRequest:
		for _, g := range r.Groups {
			n.group(g, acl.OpDescribe)
		}
	case *kmsg.DeleteGroupsRequest:
		for _, g := range r.Groups {
			n.group(g, acl.OpDelete)
		}
	case *kmsg.OffsetDeleteRequest:
		n.group(r.Group, acl.OpDelete)
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpRead)
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		n.group(r.Group, acl.OpRead)
		for _, t := range r.SubscribedTopicNames {
			n.topic(t, acl.OpDescribe)
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		for _, g := range r.Groups {
			n.group(g, acl.OpDescribe)
		}
	case *kmsg.ShareGroupHeartbeatRequest:
		n.group(r.GroupID, acl.OpRead)
		for _, t := range r.SubscribedTopicNames {
			n.topic(t, acl.OpDescribe)
		}
	case *kmsg.ShareGroupDescribeRequest:
		for _, g := range r.GroupIDs {
			n.group(g, acl.OpDescribe)
		}
	case *kmsg.ShareFetchRequest:
		n.group(str(r.GroupID), acl.OpRead)
		for _, t := range r.Topics {
			n.topic(b.aclTopicName(c, "", t.TopicID), acl.OpRead)
		}
	case *kmsg.ShareAcknowledgeRequest:
		n.group(str(r.GroupID), acl.OpRead)
		for _, t := range r.Topics {
			n.topic(b.aclTopicName(c, "", t.TopicID), acl.OpRead)
		}
	case *kmsg.DescribeShareGroupOffsetsRequest:
		for _, g := range r.Groups {
			n.group(g.GroupID, acl.OpDescribe)
			for _, t := range g.Topics {
				n.topic(t.Topic, acl.OpDescribe)
			}
		}
	case *kmsg.AlterShareGroupOffsetsRequest:
		n.group(r.GroupID, acl.OpRead)
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpRead)
		}
	case *kmsg.DeleteShareGroupOffsetsRequest:
		n.group(r.GroupID, acl.OpDelete)
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpRead)
		}

	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil && *r.TransactionalID != "" {
			n.txn(*r.TransactionalID, acl.OpWrite)
		} else if n.code == 0 && !n.k.may(acl.ResourceCluster, acl.ClusterName, acl.OpIdempotentWrite) &&
			!n.k.a.AllowedAny(withOp(n.k.r, acl.OpWrite), acl.ResourceTopic) {
			// Kafka 3.x (KIP-679): an idempotent producer needs
			// IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
			n.code = kerr.ClusterAuthorizationFailed.Code
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version < 4 {
			n.txn(r.TransactionalID, acl.OpWrite)
			for _, t := range r.Topics {
				n.topic(t.Topic, acl.OpWrite)
			}
		}
		for _, tx := range r.Transactions {
			n.txn(tx.TransactionalID, acl.OpWrite)
			for _, t := range tx.Topics {
				n.topic(t.Topic, acl.OpWrite)
			}
		}
	case *kmsg.AddOffsetsToTxnRequest:
		n.txn(r.TransactionalID, acl.OpWrite)
		n.group(r.Group, acl.OpRead)
	case *kmsg.EndTxnRequest:
		n.txn(r.TransactionalID, acl.OpWrite)
	case *kmsg.TxnOffsetCommitRequest:
		n.txn(r.TransactionalID, acl.OpWrite)
		n.group(r.Group, acl.OpRead)
		for _, t := range r.Topics {
			n.topic(t.Topic, acl.OpRead)
		}
	case *kmsg.DescribeTransactionsRequest:
		for _, id := range r.TransactionalIDs {
			n.txn(id, acl.OpDescribe)
		}
	default:
		// A key served without a rule here is refused, never let
		// through unchecked (TestEveryKeyHasAnACLRule).
		n.code = kerr.ClusterAuthorizationFailed.Code
	}
}

func withOp(r acl.Request, op acl.Operation) acl.Request {
	r.Op = op
	return r
}

// aclConfigResource is a config resource's need: a topic's on the topic,
// a group's on the group, a broker's (or its loggers') on the cluster.
func aclConfigResource(n *aclNeeds, rt kmsg.ConfigResourceType, name string, op acl.Operation) {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		n.topic(name, op)
	case kmsg.ConfigResourceTypeGroupConfig:
		n.group(name, op)
	default:
		n.cluster(op)
	}
}

// aclTopicName is a topic's name, looked up by id when the request names
// it by id only ("" when no topic has the id: nothing to leak, the
// handler answers UNKNOWN_TOPIC_ID).
func (b *Broker) aclTopicName(c *kafka.Conn, name string, id [16]byte) string {
	if name != "" || id == [16]byte{} {
		return name
	}
	t, _, ok := b.topicByID(b.tenantOf(c), id)
	if !ok {
		return ""
	}
	return t.Name
}
