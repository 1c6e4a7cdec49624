package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/wire"
)

// deleteRecordsAt asks DeleteRecords for one partition through kadm.
func deleteRecordsAt(t *testing.T, adm *kadm.Client, topic string, partition int32, at int64) kadm.DeleteRecordsResponse {
	t.Helper()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: at})
	rs, err := adm.DeleteRecords(ctxFor(t), os)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rs.On(topic, partition, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDeleteRecordsMovesLogStart deletes a prefix of a partition: the
// low watermark answered is the new log start, ListOffsets and a fetch
// from the start see it, an offset past the high watermark is refused,
// an offset below the log start changes nothing, and -1 empties the
// partition up to its high watermark; a compacted topic refuses it.
func TestDeleteRecordsMovesLogStart(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "dr", 1)
	for i := range 10 {
		if err := cl.ProduceSync(ctxFor(t), rec("dr", i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if r := deleteRecordsAt(t, adm, "dr", 0, 4); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete below 4: %+v", r)
	}
	if p, ok := n.engine.PartitionAt(wire.DefaultTenant, "dr", 0); !ok || p.LogStart() != 4 {
		t.Fatalf("log start %d after deleting below 4", p.LogStart())
	}
	starts, err := adm.ListStartOffsets(ctxFor(t), "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 4 {
		t.Fatalf("earliest offset %+v", o)
	}
	reader := n.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dr": {0: kgo.NewOffset().AtStart()}}))
	if got := consume(t, reader, 6); got[0].Offset != 4 || string(got[0].Value) != "v4" {
		t.Fatalf("first record read from the start: offset %d %q", got[0].Offset, got[0].Value)
	}

	if r := deleteRecordsAt(t, adm, "dr", 0, 11); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("past the high watermark: %+v", r)
	}
	if r := deleteRecordsAt(t, adm, "dr", 0, 2); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("below the log start: %+v", r)
	}
	if r := deleteRecordsAt(t, adm, "dr", 0, -1); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("up to the high watermark: %+v", r)
	}

	// As Kafka: compaction alone keeps each key's last record.
	compacted := kmsg.NewPtrCreateTopicsRequest()
	compacted.Topics = append(compacted.Topics, createTopicsTopic("drc", 1, -1, map[string]string{"cleanup.policy": "compact"}))
	if cr, err := compacted.RequestWith(ctxFor(t), cl); err != nil || cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("create a compacted topic: %v %+v", err, cr)
	}
	if r := deleteRecordsAt(t, adm, "drc", 0, -1); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("compacted topic: %+v", r)
	}
}
