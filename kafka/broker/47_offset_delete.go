package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// OffsetDelete (key 47), v0: forgets the group's positions in the named
// partitions. Partitions of a topic a live member subscribes to are
// refused with GROUP_SUBSCRIBED_TO_TOPIC, as Kafka does; a group that is
// neither in the coordinator nor in the store is GROUP_ID_NOT_FOUND.
func (b *Broker) handleOffsetDelete(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	tenant, coord, kErr := b.groupCoordinator(c, req.Group)
	var subscribed map[string]bool
	if kErr == nil {
		var inMemory bool
		subscribed, inMemory, kErr = coord.Subscriptions(req.Group)
		if kErr == nil && !inMemory {
			kErr = b.catchUpStoredGroups(ctx, tenant)
		}
		if kErr == nil && !inMemory && !b.engine.HasGroup(tenant, req.Group) {
			kErr = kerr.GroupIDNotFound
		}
	}
	if kErr != nil {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kErr.Code
		return resp, nil
	}
	resp := kafka.ErrorResponse(req, 0).(*kmsg.OffsetDeleteResponse) // mirrors every topic and partition
	cmd := wire.DeleteOffsetsCmd{Tenant: tenant, Group: req.Group}
	var slots []*int16
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			slot := &resp.Topics[ti].Partitions[pi].ErrorCode
			switch {
			case subscribed[t.Topic]:
				*slot = kerr.GroupSubscribedToTopic.Code
			case p.Partition < 0:
				*slot = kerr.UnknownTopicOrPartition.Code
			default:
				cmd.Items = append(cmd.Items, wire.PartitionRef{Queue: t.Topic, Partition: uint32(p.Partition)})
				slots = append(slots, slot)
			}
		}
	}
	if len(cmd.Items) == 0 {
		return resp, nil
	}
	res, err := b.engine.DeleteOffsets(ctx, &cmd)
	if err == nil && len(res.Codes) != len(slots) {
		err = wire.ErrMalformed
	}
	answerPositions(c, "delete", req.Group, slots, err, func(i int) wire.Code { return res.Codes[i] })
	return resp, nil
}
