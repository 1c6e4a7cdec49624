package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch response's frame is sized once: its record batches, topic names
// and per-partition fields fit the hint, so encoding never regrows it.
func TestFetchResponseFrameFitsItsSizeHint(t *testing.T) {
	for _, version := range []int16{4, 6} {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		for ti := range 3 {
			topic := kmsg.NewFetchResponseTopic()
			topic.Topic = strings.Repeat("t", 200*ti+1)
			for pi := range 5 {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = int32(pi)
				p.RecordBatches = make([]byte, 1000*pi*ti)
				for range pi {
					p.AbortedTransactions = append(p.AbortedTransactions, kmsg.NewFetchResponseTopicPartitionAbortedTransaction())
				}
				topic.Partitions = append(topic.Partitions, p)
			}
			resp.Topics = append(resp.Topics, topic)
		}
		frame, err := appendResponseFrame(nil, 7, resp)
		if err != nil {
			t.Fatal(err)
		}
		if hint := responseSizeHint(resp); len(frame) > hint {
			t.Fatalf("v%d: frame of %d bytes outgrew its hint of %d", version, len(frame), hint)
		}
	}
}
