package kafka

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The interop tests put real franz-go clients on both sides of the record
// codec: kgo produces batches (every codec) that records.Decode must read,
// and a kgo consumer reads batches that records.AppendBatch and
// AppendControlBatch wrote, transactions included. The handlers here are
// minimal single-partition stand-ins for the engine-backed ones.

const interopTopic = "interop"

// fakeLog is one partition held in memory.
type fakeLog struct {
	mu       sync.Mutex
	produced []records.Batch // as decoded from produce requests
	served   []byte          // the encoded log fetch serves
	hwm      int64
}

func (l *fakeLog) metadata(_ context.Context, c *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.ResponseKind().(*kmsg.MetadataResponse)
	host, port, _ := net.SplitHostPort(c.LocalAddr().String())
	p, _ := strconv.Atoi(port)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
	resp.ControllerID = 0
	topic := kmsg.NewMetadataResponseTopic()
	name := interopTopic
	topic.Topic = &name
	part := kmsg.NewMetadataResponseTopicPartition()
	part.Partition, part.Leader, part.LeaderEpoch = 0, 0, -1
	part.Replicas, part.ISR = []int32{0}, []int32{0}
	topic.Partitions = []kmsg.MetadataResponseTopicPartition{part}
	resp.Topics = []kmsg.MetadataResponseTopic{topic}
	return resp, nil
}

func (l *fakeLog) initProducerID(_ context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = 4242, 0
	return resp, nil
}

func (l *fakeLog) produce(_ context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := kreq.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			batches, err := records.Decode(p.Records, records.Limits{MaxBatchBytes: 1 << 20, MaxDecompressedBytes: 8 << 20})
			if rp.ErrorCode = RecordsErrorCode(err); err == nil {
				l.mu.Lock()
				rp.BaseOffset = l.hwm
				for _, b := range batches {
					l.hwm += int64(b.NumRecords)
				}
				l.produced = append(l.produced, batches...)
				l.mu.Unlock()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (l *fakeLog) fetch(ctx context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := kreq.ResponseKind().(*kmsg.FetchResponse)
	l.mu.Lock()
	served, hwm, aborted := l.served, l.hwm, abortedBase(l)
	l.mu.Unlock()
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p.Partition, hwm, hwm, 0
			if p.FetchOffset < hwm {
				rp.RecordBatches = served // kgo skips what is below its offset
				rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 777, FirstOffset: aborted}}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(served) == 0 || req.Topics[0].Partitions[0].FetchOffset >= hwm {
		// Nothing new: wait as a long poll would, so kgo does not spin.
		wait := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-ctx.Done():
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].RecordBatches = nil
			}
		}
	}
	return resp, nil
}

// abortedBase is where TestKgoConsumesOurEncoding puts its aborted
// transaction: after the records it stands in l.produced for. Call with l.mu.
func abortedBase(l *fakeLog) int64 {
	n := int64(0)
	for _, b := range l.produced {
		n += int64(b.NumRecords)
	}
	return n
}

func startInteropServer(t *testing.T) (*Server, *fakeLog) {
	l := &fakeLog{}
	s := startServer(t, Config{}, func(s *Server) {
		must(t, s.RegisterHandler(0, l.produce))
		must(t, s.RegisterHandler(1, l.fetch))
		must(t, s.RegisterHandler(3, l.metadata))
		must(t, s.RegisterHandler(22, l.initProducerID))
	})
	return s, l
}

func interopRecord(i int) *kgo.Record {
	r := &kgo.Record{
		Topic:     interopTopic,
		Partition: 0,
		Key:       []byte(fmt.Sprintf("key-%d", i)),
		// Compressible, so kgo keeps the codec instead of falling back.
		Value:   bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), 50),
		Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}},
	}
	if i%4 == 3 {
		r.Key, r.Value = nil, nil // null key and tombstone
	}
	return r
}

func TestKgoProducesEveryCodec(t *testing.T) {
	codecs := map[records.Compression]kgo.CompressionCodec{
		records.CompressionNone: kgo.NoCompression(), records.CompressionGzip: kgo.GzipCompression(),
		records.CompressionSnappy: kgo.SnappyCompression(), records.CompressionLZ4: kgo.Lz4Compression(),
		records.CompressionZstd: kgo.ZstdCompression(),
	}
	for want, codec := range codecs {
		t.Run(want.String(), func(t *testing.T) {
			s, l := startInteropServer(t)
			cl := newKgoClient(t, s, kgo.ProducerBatchCompression(codec),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(3))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var produced []*kgo.Record
			for i := range 8 {
				produced = append(produced, interopRecord(i))
			}
			if err := cl.ProduceSync(ctx, produced...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			var got []records.Record
			for _, b := range l.produced {
				if b.Compression() != want || b.ProducerID != 4242 || b.ProducerEpoch != 0 || b.IsTransactional() {
					t.Fatalf("batch header %+v", b)
				}
				got = append(got, b.Records...)
			}
			if len(got) != len(produced) {
				t.Fatalf("decoded %d records, produced %d", len(got), len(produced))
			}
			for i, r := range produced {
				g := got[i]
				if !bytes.Equal(g.Key, r.Key) || (g.Key == nil) != (r.Key == nil) ||
					!bytes.Equal(g.Value, r.Value) || (g.Value == nil) != (r.Value == nil) ||
					len(g.Headers) != 1 || g.Headers[0].Key != "i" || string(g.Headers[0].Value) != strconv.Itoa(i) ||
					g.Timestamp != r.Timestamp.UnixMilli() {
					t.Fatalf("record %d: got %+v, produced %+v", i, g, r)
				}
			}
		})
	}
}

// TestKgoConsumesOurEncoding serves a log written by records.AppendBatch in
// every codec, with one aborted and one committed transaction, to a
// read_committed kgo consumer.
func TestKgoConsumesOurEncoding(t *testing.T) {
	s, l := startInteropServer(t)
	codecs := []records.Compression{records.CompressionNone, records.CompressionGzip, records.CompressionSnappy, records.CompressionLZ4, records.CompressionZstd}

	var log []byte
	var want []*kgo.Record
	offset := int64(0)
	appendBatch := func(opts records.BatchOptions, recs []records.Record) {
		var err error
		if log, err = records.AppendBatch(log, opts, recs); err != nil {
			t.Fatal(err)
		}
	}
	for bi, codec := range codecs {
		opts := records.NewBatchOptions(offset)
		opts.Compression = codec
		var recs []records.Record
		for j := range 3 {
			src := interopRecord(bi*3 + j)
			ts := int64(1_700_000_000_000 + bi*1000 + j)
			recs = append(recs, records.Record{OffsetDelta: int32(j), Timestamp: ts, Key: src.Key, Value: src.Value,
				Headers: []records.Header{{Key: "i", Value: src.Headers[0].Value}}})
			src.Offset, src.Timestamp = offset+int64(j), time.UnixMilli(ts)
			want = append(want, src)
		}
		appendBatch(opts, recs)
		offset += 3
	}

	txn := func(pid int64, commit bool, value string) {
		opts := records.NewBatchOptions(offset)
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, 0, 0, true
		opts.Compression = records.CompressionZstd
		appendBatch(opts, []records.Record{{Timestamp: 1, Value: []byte(value + "-0")}, {OffsetDelta: 1, Timestamp: 2, Value: []byte(value + "-1")}})
		typ := records.ControlAbort
		if commit {
			typ = records.ControlCommit
			want = append(want, &kgo.Record{Offset: offset, Value: []byte(value + "-0")}, &kgo.Record{Offset: offset + 1, Value: []byte(value + "-1")})
		}
		log = records.AppendControlBatch(log, records.ControlMarker{BaseOffset: offset + 2, ProducerID: pid, Type: typ, Timestamp: 3})
		offset += 3
	}
	txn(777, false, "aborted")
	txn(778, true, "committed")
	l.mu.Lock()
	l.served, l.hwm = log, offset
	l.produced = []records.Batch{{NumRecords: 15}} // the aborted transaction starts at 15
	l.mu.Unlock()

	cl := newKgoClient(t, s,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{interopTopic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.RequestRetries(3))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var got []*kgo.Record
	for len(got) < len(want) && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetch error %s/%d: %v", topic, p, err)
			}
		})
		got = append(got, fetches.Records()...)
	}
	if len(got) != len(want) {
		t.Fatalf("consumed %d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Offset != w.Offset || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			!bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) {
			t.Fatalf("record %d: got offset %d key %q value %.20q, want offset %d key %q value %.20q",
				i, g.Offset, g.Key, g.Value, w.Offset, w.Key, w.Value)
		}
		if len(w.Headers) > 0 && (len(g.Headers) != 1 || !bytes.Equal(g.Headers[0].Value, w.Headers[0].Value)) {
			t.Fatalf("record %d headers %+v", i, g.Headers)
		}
		if !w.Timestamp.IsZero() && !g.Timestamp.Equal(w.Timestamp) {
			t.Fatalf("record %d timestamp %v, want %v", i, g.Timestamp, w.Timestamp)
		}
	}
}

// TestProduceRefusesBadBatches: the produce path turns codec errors into
// per-partition Kafka codes through RecordsErrorCode.
func TestProduceRefusesBadBatches(t *testing.T) {
	s, _ := startInteropServer(t)
	c := dialRaw(t, s)
	good, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: []byte("v")}})
	must(t, err)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	old := bytes.Clone(good)
	old[16] = 1
	for name, tc := range map[string]struct {
		batch []byte
		code  int16
	}{
		"crc":     {corrupt, kerr.CorruptMessage.Code},
		"magic 1": {old, kerr.InvalidRecord.Code},
		"good":    {good, 0},
	} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks = -1
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: interopTopic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: tc.batch}}}}
		resp := c.roundTrip(req).(*kmsg.ProduceResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.code {
			t.Errorf("%s: error %d, want %d", name, got, tc.code)
		}
	}
}
