package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// ShareAcknowledge (key 79), v1-2: acknowledgements outside a fetch,
// within the member's share session (epoch 0 has none to acknowledge;
// -1 acknowledges, closes the session and releases the records it still
// holds). Each partition's are applied
// as share_records.go describes.
func (b *Broker) handleShareAcknowledge(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	tenant, group, sess, code := b.beginShareRequest(c, req.GroupID, req.MemberID, req.ShareSessionEpoch, false)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	set := b.shareSettings(tenant, group)
	resp.AcquisitionLockTimeoutMillis = int32(set.lock / time.Millisecond)
	topics := newShareTopics(b, tenant)
	topics.mayRead = b.aclTopicReader(c)
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			batches := make([]shareAckBatch, len(p.AcknowledgementBatches))
			for i, a := range p.AcknowledgementBatches {
				batches[i] = shareAckBatch{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes}
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			rp.ErrorCode = b.ackSharePartition(ctx, tenant, group, set, sess, topics, tidp{t.TopicID, p.Partition}, batches)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == -1 {
		b.releaseShareSession(ctx, tenant, group, sess, topics)
	}
	return resp, nil
}
