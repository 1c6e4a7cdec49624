package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy/acl"
)

// The share-group requests (KIP-932) answer their topics per topic, as
// Kafka does: READ (DESCRIBE to describe offsets) on the group first,
// refusing the request whole, then on each topic, whose partitions answer
// TOPIC_AUTHORIZATION_FAILED while the others are served.
//
// ShareFetch and ShareAcknowledge are served even when every topic they
// name is refused: the request still moves its share session's epoch,
// acquires from the partitions already in the session, and a final one
// releases the session. A refused topic's partitions never enter the
// session and its acknowledgements are not applied (their acknowledge
// error is TOPIC_AUTHORIZATION_FAILED too).

// aclServeShares answers the requests above; false for the others.
func (b *Broker) aclServeShares(ctx context.Context, c *kafka.Conn, k aclCaller, req kmsg.Request, h kafka.Handler,
	topic func(string, acl.Operation) int16) (kmsg.Response, bool, error) {
	groupRefused := func(name string, op acl.Operation) kmsg.Response {
		if k.may(acl.ResourceGroup, name, op) {
			return nil
		}
		return kafka.ErrorResponse(req, aclCodes[acl.ResourceGroup])
	}
	var resp kmsg.Response
	var err error
	switch r := req.(type) {
	case *kmsg.ShareFetchRequest:
		if refused := groupRefused(str(r.GroupID), acl.OpRead); refused != nil {
			return refused, true, nil
		}
		resp, err = aclSplit(ctx, c, req, &r.Topics, func(t kmsg.ShareFetchRequestTopic) int16 {
			return topic(b.aclTopicName(c, "", t.TopicID), acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			// from mirrors r.Topics, now the refused topics of one code.
			refused := from.(*kmsg.ShareFetchResponse).Topics
			for i := range refused {
				for j := range refused[i].Partitions {
					rp := &refused[i].Partitions[j]
					rp.Records = []byte{}
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
					if len(r.Topics[i].Partitions[j].AcknowledgementBatches) > 0 {
						rp.AcknowledgeErrorCode = rp.ErrorCode
					}
				}
			}
			into.(*kmsg.ShareFetchResponse).Topics = append(into.(*kmsg.ShareFetchResponse).Topics, refused...)
		}, true)
	case *kmsg.ShareAcknowledgeRequest:
		if refused := groupRefused(str(r.GroupID), acl.OpRead); refused != nil {
			return refused, true, nil
		}
		resp, err = aclSplit(ctx, c, req, &r.Topics, func(t kmsg.ShareAcknowledgeRequestTopic) int16 {
			return topic(b.aclTopicName(c, "", t.TopicID), acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			refused := from.(*kmsg.ShareAcknowledgeResponse).Topics
			for i := range refused {
				for j := range refused[i].Partitions {
					rp := &refused[i].Partitions[j]
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
				}
			}
			into.(*kmsg.ShareAcknowledgeResponse).Topics = append(into.(*kmsg.ShareAcknowledgeResponse).Topics, refused...)
		}, true)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		// Each group on its own; within one the caller may describe,
		// the topics it may not describe answer the error when named and
		// are left out when it asked for all.
		described := func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
			resp, err := h(ctx, c, req)
			dr, ok := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
			if err != nil || !ok {
				return resp, err
			}
			named := map[string]bool{}
			for _, g := range req.(*kmsg.DescribeShareGroupOffsetsRequest).Groups {
				named[g.GroupID] = g.Topics != nil
			}
			for gi := range dr.Groups {
				g := &dr.Groups[gi]
				kept := g.Topics[:0]
				for _, t := range g.Topics {
					switch {
					case topic(t.Topic, acl.OpDescribe) == 0:
					case !named[g.GroupID]:
						continue
					default:
						for pi := range t.Partitions {
							rp := &t.Partitions[pi]
							rp.StartOffset, rp.LeaderEpoch, rp.Lag = -1, -1, -1
							rp.ErrorCode = aclCodes[acl.ResourceTopic]
						}
					}
					kept = append(kept, t)
				}
				g.Topics = kept
			}
			return dr, nil
		}
		resp, err = aclPartial(ctx, c, req, &r.Groups, func(g kmsg.DescribeShareGroupOffsetsRequestGroup) int16 {
			if k.may(acl.ResourceGroup, g.GroupID, acl.OpDescribe) {
				return 0
			}
			return aclCodes[acl.ResourceGroup]
		}, described, func(into, from kmsg.Response) {
			// from mirrors r.Groups, now the refused groups (ErrorResponse
			// copies no GroupID: it is not an identity field it knows).
			refused := from.(*kmsg.DescribeShareGroupOffsetsResponse).Groups
			for i := range refused {
				refused[i].GroupID = r.Groups[i].GroupID
				refused[i].Topics = nil // the group's error, nothing about its topics
			}
			into.(*kmsg.DescribeShareGroupOffsetsResponse).Groups = append(into.(*kmsg.DescribeShareGroupOffsetsResponse).Groups, refused...)
		})
	case *kmsg.AlterShareGroupOffsetsRequest:
		if refused := groupRefused(r.GroupID, acl.OpRead); refused != nil {
			return refused, true, nil
		}
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.AlterShareGroupOffsetsRequestTopic) int16 {
			return topic(t.Topic, acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.AlterShareGroupOffsetsResponse).Topics = append(into.(*kmsg.AlterShareGroupOffsetsResponse).Topics, from.(*kmsg.AlterShareGroupOffsetsResponse).Topics...)
		})
	case *kmsg.DeleteShareGroupOffsetsRequest:
		if refused := groupRefused(r.GroupID, acl.OpDelete); refused != nil {
			return refused, true, nil
		}
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) int16 {
			return topic(t.Topic, acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.DeleteShareGroupOffsetsResponse).Topics = append(into.(*kmsg.DeleteShareGroupOffsetsResponse).Topics, from.(*kmsg.DeleteShareGroupOffsetsResponse).Topics...)
		})
	default:
		return nil, false, nil
	}
	return resp, true, err
}
