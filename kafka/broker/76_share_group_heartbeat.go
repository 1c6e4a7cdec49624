package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// ShareGroupHeartbeat (key 76), v1: KIP-932 share-group membership. The
// coordinator of the group id answers; every member is assigned every
// partition of the topics it subscribes to (share_groups.go), and gets
// its assignment back whenever it changes.
func (b *Broker) handleShareGroupHeartbeat(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	tenant, _, kErr := b.groupCoordinator(c, req.GroupID)
	if kErr == nil && req.MemberEpoch == 0 { // a join
		kErr = b.admitGroup(tenant, nil, req.GroupID)
	}
	if kErr != nil {
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	h := shareBeat{key: shareGroupKey{tenant, req.GroupID}, memberID: req.MemberID, memberEpoch: req.MemberEpoch,
		rackID: deref(req.RackID), clientHost: "/" + hostOf(c), subscribed: req.SubscribedTopicNames}
	if hdr, ok := kafka.RequestHeaderFromContext(ctx); ok {
		h.clientID = hdr.ClientID
	}
	res := b.shares.heartbeat(h, topicInfos(b.engine, tenant))
	resp.ErrorCode = errCode(res.err)
	if res.message != "" {
		resp.ErrorMessage = kmsg.StringPtr(res.message)
	}
	if res.err != nil {
		return resp, nil
	}
	resp.MemberID = kmsg.StringPtr(res.memberID)
	resp.MemberEpoch = res.memberEpoch
	resp.HeartbeatIntervalMillis = int32(b.shares.interval / time.Millisecond)
	if res.assignment != nil {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for id, parts := range res.assignment {
			t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			t.TopicID, t.Partitions = id, parts
			a.TopicPartitions = append(a.TopicPartitions, t)
		}
		resp.Assignment = &a
	}
	return resp, nil
}
