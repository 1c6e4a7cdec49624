package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy/acl"
)

// Requests that list resources answer the refused ones with their error
// and serve the others, as Kafka does (a tool describing every topic's
// configs, or every group, is not refused all of them for one): Fetch,
// ListOffsets, CreateTopics, DeleteTopics, DescribeConfigs and
// DescribeGroups here; the group, transaction and share-group requests
// naming topics in acl_offsets.go and acl_shares.go.

// aclPartial serves the items of *items refusal lets through (0) and
// answers each other one with its code, in a response of the same kind
// (kafka.ErrorResponse) whose list merge appends. *items is as it was when
// it returns. With every item allowed it only reads them.
func aclPartial[T any](ctx context.Context, c *kafka.Conn, req kmsg.Request, items *[]T, refusal func(T) int16,
	h kafka.Handler, merge func(into, from kmsg.Response)) (kmsg.Response, error) {
	all := *items
	first := -1
	for i, it := range all {
		if refusal(it) != 0 {
			first = i
			break
		}
	}
	if first < 0 {
		return h(ctx, c, req)
	}
	defer func() { *items = all }()
	kept := append([]T(nil), all[:first]...)
	byCode := map[int16][]T{}
	var codes []int16
	for _, it := range all[first:] {
		code := refusal(it)
		if code == 0 {
			kept = append(kept, it)
			continue
		}
		if _, seen := byCode[code]; !seen {
			codes = append(codes, code)
		}
		byCode[code] = append(byCode[code], it)
	}
	// Nothing allowed: an empty answer of the request's version (no
	// top-level error: the refusals are per item, as Kafka's).
	resp := req.ResponseKind()
	if len(kept) > 0 {
		*items = kept
		r, err := h(ctx, c, req)
		if err != nil || r == nil {
			return r, err
		}
		resp = r
	}
	for _, code := range codes {
		*items = byCode[code]
		merge(resp, kafka.ErrorResponse(req, code))
	}
	return resp, nil
}

// aclServePartial answers the requests aclPartial serves, and those of
// acl_offsets.go and acl_shares.go; false for the others.
func (b *Broker) aclServePartial(ctx context.Context, c *kafka.Conn, k aclCaller, req kmsg.Request, h kafka.Handler) (kmsg.Response, bool, error) {
	topicCode := func(name string, op acl.Operation) int16 {
		if name == "" || k.may(acl.ResourceTopic, name, op) {
			return 0
		}
		return aclCodes[acl.ResourceTopic]
	}
	var resp kmsg.Response
	var err error
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.FetchRequestTopic) int16 {
			return topicCode(b.aclTopicName(c, t.Topic, t.TopicID), acl.OpRead)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.FetchResponse).Topics = append(into.(*kmsg.FetchResponse).Topics, from.(*kmsg.FetchResponse).Topics...)
		})
	case *kmsg.ListOffsetsRequest:
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.ListOffsetsRequestTopic) int16 {
			return topicCode(t.Topic, acl.OpDescribe)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.ListOffsetsResponse).Topics = append(into.(*kmsg.ListOffsetsResponse).Topics, from.(*kmsg.ListOffsetsResponse).Topics...)
		})
	case *kmsg.CreateTopicsRequest:
		mayCluster := k.may(acl.ResourceCluster, acl.ClusterName, acl.OpCreate)
		resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.CreateTopicsRequestTopic) int16 {
			if mayCluster {
				return 0
			}
			return topicCode(t.Topic, acl.OpCreate)
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.CreateTopicsResponse).Topics = append(into.(*kmsg.CreateTopicsResponse).Topics, from.(*kmsg.CreateTopicsResponse).Topics...)
		})
	case *kmsg.DeleteTopicsRequest:
		merge := func(into, from kmsg.Response) {
			into.(*kmsg.DeleteTopicsResponse).Topics = append(into.(*kmsg.DeleteTopicsResponse).Topics, from.(*kmsg.DeleteTopicsResponse).Topics...)
		}
		if len(r.Topics) > 0 {
			resp, err = aclPartial(ctx, c, req, &r.Topics, func(t kmsg.DeleteTopicsRequestTopic) int16 {
				name := ""
				if t.Topic != nil {
					name = *t.Topic
				}
				return topicCode(b.aclTopicName(c, name, t.TopicID), acl.OpDelete)
			}, h, merge)
		} else {
			resp, err = aclPartial(ctx, c, req, &r.TopicNames, func(name string) int16 { return topicCode(name, acl.OpDelete) }, h, merge)
		}
	case *kmsg.DescribeConfigsRequest:
		resp, err = aclPartial(ctx, c, req, &r.Resources, func(res kmsg.DescribeConfigsRequestResource) int16 {
			n := aclNeeds{k: k}
			aclConfigResource(&n, res.ResourceType, res.ResourceName, acl.OpDescribeConfigs)
			return n.code
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.DescribeConfigsResponse).Resources = append(into.(*kmsg.DescribeConfigsResponse).Resources, from.(*kmsg.DescribeConfigsResponse).Resources...)
		})
	case *kmsg.DescribeGroupsRequest:
		resp, err = aclPartial(ctx, c, req, &r.Groups, func(g string) int16 {
			if k.may(acl.ResourceGroup, g, acl.OpDescribe) {
				return 0
			}
			return aclCodes[acl.ResourceGroup]
		}, h, func(into, from kmsg.Response) {
			into.(*kmsg.DescribeGroupsResponse).Groups = append(into.(*kmsg.DescribeGroupsResponse).Groups, from.(*kmsg.DescribeGroupsResponse).Groups...)
		})
	default:
		return b.aclServeOffsets(ctx, c, k, req, h)
	}
	return resp, true, err
}
