package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy/acl"
)

// The group and transaction requests that name topics answer them per
// topic, as Kafka's KafkaApis does: the group (or transactional id) is
// checked first and refuses the request whole, then each topic the
// caller may not use answers TOPIC_AUTHORIZATION_FAILED on every one of
// its partitions while the allowed ones are served (committed, fetched,
// staged, deleted). AddPartitionsToTxn is the exception Kafka makes: a
// transaction gets all its partitions or none, so one refused topic
// leaves every other partition OPERATION_NOT_ATTEMPTED and nothing added.

// aclServeOffsets answers the requests above; false for the others.
func (b *Broker) aclServeOffsets(ctx context.Context, c *kafka.Conn, k aclCaller, req kmsg.Request, h kafka.Handler) (kmsg.Response, bool, error) {
	// topic is the refusal of op on a topic: 0 when allowed, or for a
	// name no topic has (the handler answers it unknown).
	topic := func(name string, op acl.Operation) int16 {
		if name == "" || k.may(acl.ResourceTopic, name, op) {
			return 0
		}
		return aclCodes[acl.ResourceTopic]
	}
	whole := func(rt acl.ResourceType, name string, op acl.Operation) (kmsg.Response, bool) {
		if k.may(rt, name, op) {
			return nil, false
		}
		return kafka.ErrorResponse(req, aclCodes[rt]), true
	}
	var resp kmsg.Response
	var err error
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		if refused, ok := whole(acl.ResourceGroup, r.Group, acl.OpRead); ok {
			return refused, true, nil
		}
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.OffsetCommitRequestTopic) int16 {
			return topic(b.aclTopicName(c, t.Topic, t.TopicID), acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.OffsetCommitResponse).Topics = append(into.(*kmsg.OffsetCommitResponse).Topics, from.(*kmsg.OffsetCommitResponse).Topics...)
		})
	case *kmsg.OffsetFetchRequest:
		if r.Version >= 8 {
			return nil, false, nil // the groups form, not served (versions.go): aclCheck's whole refusal
		}
		if refused, ok := whole(acl.ResourceGroup, r.Group, acl.OpDescribe); ok {
			return refused, true, nil
		}
		if r.Topics == nil {
			// Every position of the group: the topics the caller may
			// not describe are left out, as Kafka filters them.
			resp, err = h(ctx, c, req)
			if fr, ok := resp.(*kmsg.OffsetFetchResponse); ok && err == nil {
				kept := fr.Topics[:0]
				for _, t := range fr.Topics {
					if topic(t.Topic, acl.OpDescribe) == 0 {
						kept = append(kept, t)
					}
				}
				fr.Topics = kept
			}
			break
		}
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.OffsetFetchRequestTopic) int16 {
			return topic(t.Topic, acl.OpDescribe)
		}, h, func(into, from kmsg.Response) {
			refused := from.(*kmsg.OffsetFetchResponse).Topics
			for i := range refused {
				for j := range refused[i].Partitions {
					refused[i].Partitions[j].Offset = -1 // nothing said about the position
				}
			}
			into.(*kmsg.OffsetFetchResponse).Topics = append(into.(*kmsg.OffsetFetchResponse).Topics, refused...)
		})
	case *kmsg.TxnOffsetCommitRequest:
		if refused, ok := whole(acl.ResourceTransactionalID, r.TransactionalID, acl.OpWrite); ok {
			return refused, true, nil
		}
		if refused, ok := whole(acl.ResourceGroup, r.Group, acl.OpRead); ok {
			return refused, true, nil
		}
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) int16 {
			return topic(t.Topic, acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.TxnOffsetCommitResponse).Topics = append(into.(*kmsg.TxnOffsetCommitResponse).Topics, from.(*kmsg.TxnOffsetCommitResponse).Topics...)
		})
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 {
			return nil, false, nil // the batched form, not served (versions.go): aclCheck's whole refusal
		}
		if refused, ok := whole(acl.ResourceTransactionalID, r.TransactionalID, acl.OpWrite); ok {
			return refused, true, nil
		}
		return aclAddPartitionsToTxn(ctx, c, r, h, func(name string) int16 { return topic(name, acl.OpWrite) })
	case *kmsg.OffsetDeleteRequest:
		if refused, ok := whole(acl.ResourceGroup, r.Group, acl.OpDelete); ok {
			return refused, true, nil
		}
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.OffsetDeleteRequestTopic) int16 {
			return topic(t.Topic, acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.OffsetDeleteResponse).Topics = append(into.(*kmsg.OffsetDeleteResponse).Topics, from.(*kmsg.OffsetDeleteResponse).Topics...)
		})
	default:
		return b.aclServeShares(ctx, c, k, req, h, topic)
	}
	return resp, true, err
}

// aclAddPartitionsToTxn adds the partitions when the caller may write
// every topic named; otherwise it adds none, as Kafka: the refused
// topics' partitions answer TOPIC_AUTHORIZATION_FAILED, every other
// OPERATION_NOT_ATTEMPTED.
func aclAddPartitionsToTxn(ctx context.Context, c *kafka.Conn, req *kmsg.AddPartitionsToTxnRequest, h kafka.Handler,
	refusal func(string) int16) (kmsg.Response, bool, error) {
	refused := false
	for _, t := range req.Topics {
		if refusal(t.Topic) != 0 {
			refused = true
			break
		}
	}
	if !refused {
		resp, err := h(ctx, c, req)
		return resp, true, err
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		code := refusal(t.Topic)
		if code == 0 {
			code = kerr.OperationNotAttempted.Code
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, true, nil
}
