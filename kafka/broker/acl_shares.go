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
// ShareFetch and ShareAcknowledge check the topics where the share
// session is, in the handler (aclTopicReader): as in Kafka a refused
// topic's partitions enter the session, and every fetch answers each one
// TOPIC_AUTHORIZATION_FAILED, acquiring nothing from it, while the others
// are served; its acknowledgements are not applied (their acknowledge
// error is the same). So READ taken away stops a partition already in a
// session, and the request still moves the session's epoch on and a
// closing one still releases what the session holds.

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
		// The topics are checked by the handler (aclTopicReader), on
		// every partition of the session each time.
		if refused := groupRefused(str(r.GroupID), acl.OpRead); refused != nil {
			return refused, true, nil
		}
		resp, err = h(ctx, c, req)
	case *kmsg.ShareAcknowledgeRequest:
		if refused := groupRefused(str(r.GroupID), acl.OpRead); refused != nil {
			return refused, true, nil
		}
		resp, err = h(ctx, c, req)
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

// aclTopicReader says whether c may READ a topic, for the share handlers
// that check their session's partitions on every request; nil with ACLs
// off (every topic).
func (b *Broker) aclTopicReader(c *kafka.Conn) func(name string) bool {
	if !b.cfg.ACL.Enabled() {
		return nil
	}
	k := b.aclCallerOf(c)
	return func(name string) bool { return k.may(acl.ResourceTopic, name, acl.OpRead) }
}

// refused says whether the caller may not READ k's topic, once per topic
// a request: false for a topic no one has (the handler answers it
// unknown) and with ACLs off.
func (s *shareTopics) refused(k tidp) bool {
	if s.mayRead == nil || !s.known(k.id) {
		return false
	}
	r, ok := s.refusal[k.id]
	if !ok {
		r = !s.mayRead(s.byID[k.id].Name)
		if s.refusal == nil {
			s.refusal = map[[16]byte]bool{}
		}
		s.refusal[k.id] = r
	}
	return r
}
