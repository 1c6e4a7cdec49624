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

// A frame given back is handed out again for a frame of its class, empty,
// and frames outside the pooled sizes are never kept.
func TestFramePoolsBySize(t *testing.T) {
	for _, c := range []struct{ n, class int }{{1, -1}, {minPooledFrame, 0}, {minPooledFrame + 1, 1}, {maxPooledFrame, 9}, {maxPooledFrame + 1, -1}} {
		if got := frameClass(c.n); c.n >= minPooledFrame && c.n <= maxPooledFrame && got != c.class {
			t.Fatalf("class of %d: %d, want %d", c.n, got, c.class)
		}
	}
	b := getFrame(300 << 10)
	if cap(b) < 300<<10 || len(b) != 0 {
		t.Fatalf("frame of cap %d len %d", cap(b), len(b))
	}
	b = append(b, "written"...)
	putFrame(b)
	if again := getFrame(300 << 10); len(again) != 0 || cap(again) < 300<<10 {
		t.Fatalf("a frame came back with cap %d len %d", cap(again), len(again))
	}
	if small := getFrame(100); cap(small) != 100 {
		t.Fatalf("a small frame of cap %d", cap(small))
	}
}
