package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleDescribeLogDirs reports one log directory (the node's data
// directory) holding every partition of the asked topics (every node holds
// a replica of every raft group), with each partition's estimated size on
// disk in its group's store. Volume sizes are unknown (-1).
func (b *Broker) handleDescribeLogDirs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	tenant := b.tenantOf(c)
	// Topics created through another node a moment ago are listed
	// (catch_up.go); past the wait, what this node holds is.
	_ = b.catchUpTenant(ctx, tenant)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, dir.TotalBytes, dir.UsableBytes = b.cfg.LogDir, -1, -1
	want := req.Topics
	if want == nil {
		for _, t := range b.engine.KafkaTopics(tenant) {
			if b.overMetadataCap(t.Partitions) {
				continue // not shown to Kafka clients (partition_caps.go)
			}
			all := kmsg.NewDescribeLogDirsRequestTopic()
			all.Topic = t.Name
			for i := range t.Partitions {
				all.Partitions = append(all.Partitions, int32(i))
			}
			want = append(want, all)
		}
	}
	for _, t := range want {
		rt := kmsg.NewDescribeLogDirsResponseDirTopic()
		rt.Topic = t.Topic
		for _, i := range t.Partitions {
			p, ok := b.partition(tenant, t.Topic, i)
			if !ok {
				continue // Kafka leaves out what the broker does not host
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size = i, p.Store().PartitionDiskUsage(p.Partition)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, rt)
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}
