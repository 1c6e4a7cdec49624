package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy/acl"
)

// The requests ACLs answer in part, as Kafka does: a produce's refused
// topics get TOPIC_AUTHORIZATION_FAILED and the others are written; a
// metadata request lists only the topics the caller may describe (a named
// one it may not gets the error); ListGroups and ListTransactions leave
// out what it may not describe.

// aclProduce serves the topics the caller may write and refuses the
// others. A transactional produce first needs WRITE on its transactional
// id, refused whole without it.
func (b *Broker) aclProduce(ctx context.Context, c *kafka.Conn, k aclCaller, req *kmsg.ProduceRequest, h kafka.Handler) (kmsg.Response, error) {
	if req.TransactionID != nil && *req.TransactionID != "" && !k.may(acl.ResourceTransactionalID, *req.TransactionID, acl.OpWrite) {
		return kafka.ErrorResponse(req, kerr.TransactionalIDAuthorizationFailed.Code), nil
	}
	// The common case, every topic allowed, copies nothing.
	refusedAt := -1
	for i, t := range req.Topics {
		if !k.may(acl.ResourceTopic, b.aclTopicName(c, t.Topic, t.TopicID), acl.OpWrite) {
			refusedAt = i
			break
		}
	}
	if refusedAt < 0 {
		return h(ctx, c, req)
	}
	var refused []kmsg.ProduceRequestTopic
	kept := slices.Clone(req.Topics[:refusedAt])
	for _, t := range req.Topics[refusedAt:] {
		if k.may(acl.ResourceTopic, b.aclTopicName(c, t.Topic, t.TopicID), acl.OpWrite) {
			kept = append(kept, t)
		} else {
			refused = append(refused, t)
		}
	}
	all := req.Topics
	req.Topics = kept
	resp, err := h(ctx, c, req)
	req.Topics = all
	if err != nil || resp == nil { // acks=0 answers nothing
		return resp, err
	}
	pr := resp.(*kmsg.ProduceResponse)
	for _, t := range refused {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		pr.Topics = append(pr.Topics, rt)
	}
	return pr, nil
}

// aclMetadata answers a metadata request with only the topics the caller
// may describe. Automatic creation of a named topic needs CREATE on it or
// on the cluster (checked where it happens, aclMayCreate).
func aclMetadata(ctx context.Context, c *kafka.Conn, k aclCaller, req *kmsg.MetadataRequest, h kafka.Handler) (kmsg.Response, error) {
	listAll := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	resp, err := h(ctx, c, req)
	if err != nil || resp == nil {
		return resp, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	kept := mr.Topics[:0]
	for _, t := range mr.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		switch {
		case name == "" || k.may(acl.ResourceTopic, name, acl.OpDescribe):
			kept = append(kept, t)
		case !listAll:
			// Named: the error, and nothing about the topic (whether it
			// exists included), as Kafka.
			e := kmsg.NewMetadataResponseTopic()
			e.Topic, e.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
			kept = append(kept, e)
		}
	}
	mr.Topics = kept
	return mr, nil
}

// aclListGroups lists every group to a caller with DESCRIBE on the
// cluster, else the groups it may describe.
func aclListGroups(ctx context.Context, c *kafka.Conn, k aclCaller, req *kmsg.ListGroupsRequest, h kafka.Handler) (kmsg.Response, error) {
	resp, err := h(ctx, c, req)
	if err != nil || resp == nil || k.may(acl.ResourceCluster, acl.ClusterName, acl.OpDescribe) {
		return resp, err
	}
	lr := resp.(*kmsg.ListGroupsResponse)
	kept := lr.Groups[:0]
	for _, g := range lr.Groups {
		if k.may(acl.ResourceGroup, g.Group, acl.OpDescribe) {
			kept = append(kept, g)
		}
	}
	lr.Groups = kept
	return lr, nil
}

// aclListTransactions lists the transactional ids the caller may
// describe.
func aclListTransactions(ctx context.Context, c *kafka.Conn, k aclCaller, req *kmsg.ListTransactionsRequest, h kafka.Handler) (kmsg.Response, error) {
	resp, err := h(ctx, c, req)
	if err != nil || resp == nil {
		return resp, err
	}
	lr := resp.(*kmsg.ListTransactionsResponse)
	kept := lr.TransactionStates[:0]
	for _, s := range lr.TransactionStates {
		if k.may(acl.ResourceTransactionalID, s.TransactionalID, acl.OpDescribe) {
			kept = append(kept, s)
		}
	}
	lr.TransactionStates = kept
	return lr, nil
}
