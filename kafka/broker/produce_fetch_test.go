package broker

import (
	"bytes"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/records"
)

func TestProduceConsumeEveryCodec(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DefaultPartitions = 3 })
	codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			prod := n.client(kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic))
			const count = 200
			var want []string
			for i := 0; i < count; i++ {
				r := rec(topic, i)
				if err := prod.ProduceSync(ctxFor(t), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
				want = append(want, string(r.Key)+"="+string(r.Value)+"/"+string(r.Headers[0].Value))
			}
			cons := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			got := consume(t, cons, count)
			var seen []string
			perPartition := map[int32]int64{}
			for _, r := range got {
				if next, ok := perPartition[r.Partition]; ok && r.Offset != next {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next-1)
				}
				perPartition[r.Partition] = r.Offset + 1
				seen = append(seen, string(r.Key)+"="+string(r.Value)+"/"+string(r.Headers[0].Value))
			}
			sort.Strings(want)
			sort.Strings(seen)
			if fmt.Sprint(want) != fmt.Sprint(seen) {
				t.Fatalf("consumed records differ:\n%v\n%v", want, seen)
			}
			if len(perPartition) != 3 {
				t.Fatalf("records in %d partitions, want 3", len(perPartition))
			}
		})
	}
}

// rawProduce sends one produce of records to topic/partition 0.
func rawProduce(t *testing.T, cl *kgo.Client, topic string, records []byte, acks int16) *kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return &rawProduceResponse(t, cl, topic, records, acks).Topics[0].Partitions[0]
}

// produceRequest is a produce of records to topic/partition 0.
func produceRequest(topic string, records []byte, acks int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// rawProduceResponse is rawProduce's whole response.
func rawProduceResponse(t *testing.T, cl *kgo.Client, topic string, records []byte, acks int16) *kmsg.ProduceResponse {
	t.Helper()
	resp, err := produceRequest(topic, records, acks).RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestProduceBadInput(t *testing.T) {
	n := startNode(t, nil)
	cl := n.client()
	good, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if p := rawProduce(t, cl, "bad", good, -1); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("good batch: %+v", p)
	}
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	oldMagic := bytes.Clone(good)
	oldMagic[16] = 1
	control := records.AppendControlBatch(nil, records.ControlMarker{ProducerID: 1, Type: records.ControlCommit})
	for _, c := range []struct {
		name string
		data []byte
		want int16
	}{
		{"bad crc", badCRC, kerr.CorruptMessage.Code},
		{"magic 1", oldMagic, kerr.InvalidRecord.Code},
		{"truncated", good[:30], kerr.CorruptMessage.Code},
		{"control batch", control, kerr.InvalidRecord.Code},
		{"too large", mustBatch(t, make([]byte, 2<<20)), kerr.MessageTooLarge.Code},
	} {
		if p := rawProduce(t, cl, "bad", c.data, -1); p.ErrorCode != c.want {
			t.Errorf("%s: error %d, want %d", c.name, p.ErrorCode, c.want)
		}
	}
	// Nothing but the good batch was stored.
	if p := rawProduce(t, cl, "bad", good, 1); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("after bad input: %+v", p)
	}
}

func mustBatch(t *testing.T, value []byte) []byte {
	b, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestForgottenProducerIsUnknown: a batch of an idempotent producer the
// partition has no state for (never seen, or forgotten after the dedup
// window) that does not start at sequence 0 answers UNKNOWN_PRODUCER_ID with
// the log start offset, as Kafka does, so the client can tell that its
// state expired rather than that records were lost (KIP-360).
func TestForgottenProducerIsUnknown(t *testing.T) {
	const window = 300 * time.Millisecond
	n := startNode(t, func(c *Config) { c.DedupWindow = window })
	cl := n.client()
	createTopic(t, cl, "forgotten", 1)
	ir, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxFor(t), cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatal(err, ir.ErrorCode)
	}
	batch := func(seq int32) []byte {
		opts := records.NewBatchOptions(0)
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = ir.ProducerID, ir.ProducerEpoch, seq
		b, err := records.AppendBatch(nil, opts, []records.Record{{Value: []byte(fmt.Sprint(seq))}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if p := rawProduce(t, cl, "forgotten", batch(3), -1); p.ErrorCode != kerr.UnknownProducerID.Code || p.LogStartOffset != 0 {
		t.Fatalf("never seen, mid-stream: error %d, log start %d; want %d, 0", p.ErrorCode, p.LogStartOffset, kerr.UnknownProducerID.Code)
	}
	for seq := int32(0); seq < 2; seq++ {
		if p := rawProduce(t, cl, "forgotten", batch(seq), -1); p.ErrorCode != 0 {
			t.Fatalf("seq %d: error %d", seq, p.ErrorCode)
		}
	}
	// Sending the last batch again is a duplicate while the state lives;
	// once the window has passed the producer is unknown.
	deadline := time.Now().Add(testWait)
	for {
		p := rawProduce(t, cl, "forgotten", batch(1), -1)
		if p.ErrorCode == kerr.UnknownProducerID.Code && p.LogStartOffset == 0 {
			break
		}
		if p.ErrorCode != 0 || time.Now().After(deadline) {
			t.Fatalf("after the dedup window: error %d, log start %d; want %d, 0", p.ErrorCode, p.LogStartOffset, kerr.UnknownProducerID.Code)
		}
		time.Sleep(window / 10) // paces the poll
	}
	if hwm(n, "forgotten", 0) != 2 {
		t.Fatal("a refused batch was stored")
	}
}

// One fetch naming several partitions, one of them missing, answers each
// partition with its own records only and the missing one with its error:
// every partition's batches are encoded into one shared buffer and sliced
// out of it.
func TestFetchOfSeveralPartitionsAnswersEachItsOwn(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DefaultPartitions = 3 })
	const topic = "several"
	prod := n.client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 5+int(p); i++ {
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))}
			if err := prod.ProduceSync(ctxFor(t), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl := nodeClient(t, n)
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for _, p := range []int32{2, 99, 0, 1} {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.FetchResponse](t, cl, int32(n.broker.cfg.NodeID), req)
	for _, rp := range resp.Topics[0].Partitions {
		if rp.Partition == 99 {
			if rp.ErrorCode == 0 || len(rp.RecordBatches) != 0 {
				t.Fatalf("missing partition: error %d, %d bytes", rp.ErrorCode, len(rp.RecordBatches))
			}
			continue
		}
		if rp.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
		}
		batches, err := records.Decode(rp.RecordBatches, records.Limits{})
		if err != nil {
			t.Fatalf("partition %d: %v", rp.Partition, err)
		}
		var got []string
		for _, b := range batches {
			for _, r := range b.Records {
				got = append(got, fmt.Sprintf("%d:%s", b.BaseOffset+int64(r.OffsetDelta), r.Value))
			}
		}
		var want []string
		for i := 1; i < 5+int(rp.Partition); i++ {
			want = append(want, fmt.Sprintf("%d:p%d-%d", i, rp.Partition, i))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("partition %d: got %v, want %v", rp.Partition, got, want)
		}
	}
}
