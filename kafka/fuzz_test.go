package kafka

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var writeSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzRequestFrame from real encodings")

// FuzzRequestFrame feeds arbitrary request frames (the bytes after the size
// prefix) to the server's decoding path and to what it answers without a
// handler: ApiVersions, and UNSUPPORTED_VERSION for out-of-window versions.
// Nothing may panic, failures must be the connection-closing errors, and
// every answer must be a frame a client can decode.
func FuzzRequestFrame(f *testing.F) {
	s, err := NewServer(Config{Addr: "127.0.0.1:0", Logger: testLogger(f)})
	if err != nil {
		f.Fatal(err)
	}
	s.advertised = advertisedVersions(s.handlers)
	conn := &Conn{srv: s, log: s.log}

	f.Fuzz(func(t *testing.T, frame []byte) {
		d, err := decodeRequest(frame)
		if err != nil {
			if !errors.Is(err, errMalformedFrame) && !errors.Is(err, errUnknownKey) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		var out []byte
		var asked kmsg.Request
		switch {
		case !d.inWindow:
			out, err = s.unsupportedVersionFrame(d)
			asked = d.req
			if d.hdr.Key == keyApiVersions {
				asked = apiVersionsRequest(0)
			}
		case d.hdr.Key == keyApiVersions:
			var resp kmsg.Response
			resp, err = handleApiVersions(context.Background(), conn, d.req)
			if err == nil {
				out, err = appendResponseFrame(nil, d.hdr.CorrelationID, resp)
			}
			asked = d.req
		default:
			out, err = appendResponseFrame(nil, d.hdr.CorrelationID, ErrorResponse(d.req, 7))
			asked = d.req
		}
		if err != nil {
			t.Fatalf("answering %s v%d: %v", KeyName(d.hdr.Key), d.hdr.Version, err)
		}
		if _, corr, err := parseResponse(asked, out[4:]); err != nil || corr != d.hdr.CorrelationID {
			t.Fatalf("answer to %s v%d does not decode: corr %d, %v", KeyName(d.hdr.Key), d.hdr.Version, corr, err)
		}
	})
}

// seedRequests returns real requests for every key of the table at both ends
// of its window, a few just outside it, and ones with content.
func seedRequests(t testing.TB) map[string]kmsg.Request {
	seeds := map[string]kmsg.Request{}
	keys := make([]int16, 0, len(supportedVersions))
	for k := range supportedVersions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w := supportedVersions[k]
		for _, v := range []int16{w.Min, w.Max} {
			req := kmsg.RequestForKey(k)
			req.SetVersion(v)
			seeds[fmt.Sprintf("%02d-%s-v%d", k, KeyName(k), v)] = req
		}
	}
	seeds["18-ApiVersions-v3-named"] = apiVersionsRequest(3)
	seeds["18-ApiVersions-v4-out-of-window"] = apiVersionsRequest(4)

	batch, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Key: []byte("k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks = -1
	produce.TimeoutMillis = 5000
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
	seeds["00-Produce-v9-records"] = produce

	old := kmsg.NewPtrProduceRequest()
	old.SetVersion(2)
	old.Topics = produce.Topics
	seeds["00-Produce-v2-out-of-window"] = old

	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	topic := "orders"
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	seeds["03-Metadata-v9-topic"] = meta

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(6)
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 10, PartitionMaxBytes: 1 << 20}}}}
	seeds["01-Fetch-v6-partition"] = fetch

	groups := kmsg.NewPtrDescribeGroupsRequest()
	groups.SetVersion(3)
	groups.Groups = []string{"g1"}
	seeds["15-DescribeGroups-v3-group"] = groups

	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	auth.SASLAuthBytes = []byte("\x00alice\x00secret")
	seeds["36-SaslAuthenticate-v1-token"] = auth
	return seeds
}

// TestWriteFuzzSeeds regenerates the FuzzRequestFrame corpus when run with
// -write-fuzz-seeds; otherwise it checks the corpus is there.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRequestFrame")
	if !*writeSeeds {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("no seed corpus in %s (run with -write-fuzz-seeds): %v", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	for name, req := range seedRequests(t) {
		frame := formatter.AppendRequest(nil, req, 42)[4:] // the fuzzer gets what follows the size
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", frame)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
