package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker/groups"
)

// DescribeGroups (key 15), v0-5 (v4 adds static members' instance ids): a group's state, protocol and members
// from the coordinator's memory. A Queen group the coordinator does not
// hold (only positions: an HTTP bus-mode group, or a Kafka group whose
// members left long ago) is Empty; an unknown one is Dead, as in Kafka.
func (b *Broker) handleDescribeGroups(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		tenant, coord, kErr := b.groupCoordinator(c, name)
		if kErr != nil {
			rg.ErrorCode = kErr.Code
		} else if d, ok := coord.Describe(name); ok {
			rg.State, rg.ProtocolType, rg.Protocol = d.State.String(), d.ProtocolType, d.Protocol
			for _, m := range d.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, nullable(m.InstanceID), m.ClientID, m.ClientHost
				rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
				rg.Members = append(rg.Members, rm)
			}
		} else if kErr = b.catchUpStoredGroups(ctx, tenant); kErr != nil {
			rg.ErrorCode = kErr.Code
		} else if b.engine.HasGroup(tenant, name) {
			rg.State = groups.Empty.String()
		} else {
			rg.State = groups.Dead.String()
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
