package broker

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
)

// JoinGroup (key 11), v0-9. The request parks in the coordinator until the
// rebalance it joins completes; v4 joins without a member id are answered
// MEMBER_ID_REQUIRED with one to join again with. v0 has no rebalance
// timeout: the session timeout stands in, as in Kafka. v5 brings static
// membership (group.instance.id, groups/static.go), v9 KIP-814's
// SkipAssignment; v8's reason is only logged by clients' brokers, and here
// not at all. A join answer goes out once the membership it recorded was
// written, and as NOT_COORDINATOR if this node stopped coordinating the
// group meanwhile (members_writer.go).
func (b *Broker) handleJoinGroup(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	tenant, coord, kErr := b.groupCoordinator(c, req.Group)
	if kErr == nil {
		kErr = b.admitGroup(tenant, coord, req.Group)
	}
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	jr := groups.JoinRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		ClientHost:           "/" + hostOf(c),
		ProtocolType:         req.ProtocolType,
		SessionTimeout:       millis(req.SessionTimeoutMillis),
		RebalanceTimeout:     millis(req.RebalanceTimeoutMillis),
		RequireKnownMemberID: req.Version >= 4,
		InstanceID:           deref(req.InstanceID),
		SkipAssignment:       req.Version >= 9,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if hdr, ok := kafka.RequestHeaderFromContext(ctx); ok {
		jr.ClientID = hdr.ClientID
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, groups.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	res, err := coord.Join(ctx, jr)
	if err != nil {
		return nil, err // the connection is closing
	}
	if res.Err == nil {
		if kErr := b.groups.confirm(ctx, b.groupKey(tenant, req.Group), req.Group, coord); kErr != nil {
			resp.ErrorCode = kErr.Code
			return resp, nil
		}
	}
	resp.ErrorCode = errCode(res.Err)
	resp.Generation, resp.LeaderID, resp.MemberID = res.Generation, res.LeaderID, res.MemberID
	resp.SkipAssignment = res.SkipAssignment
	resp.Protocol = kmsg.StringPtr(res.Protocol)
	resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, nullable(m.InstanceID), m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// hostOf is the client's IP address, as DescribeGroups shows it.
func hostOf(c *kafka.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
