package kafka

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func metadataStub(_ context.Context, _ *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return kreq.ResponseKind(), nil
}

func TestApiVersionsInWindow(t *testing.T) {
	s := startServer(t, Config{}, func(s *Server) {
		if err := s.RegisterHandler(3, metadataStub); err != nil {
			t.Fatal(err)
		}
	})
	c := dialRaw(t, s)
	for v := int16(0); v <= 3; v++ {
		resp := c.roundTrip(apiVersionsRequest(v)).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		// Only keys with a handler are advertised: Metadata and ApiVersions.
		want := map[int16]VersionRange{3: {0, 12}, 18: {0, 3}}
		if len(resp.ApiKeys) != len(want) {
			t.Fatalf("v%d: advertised %+v", v, resp.ApiKeys)
		}
		for _, k := range resp.ApiKeys {
			if w := want[k.ApiKey]; w.Min != k.MinVersion || w.Max != k.MaxVersion {
				t.Fatalf("v%d: key %d advertised %d..%d, want %d..%d", v, k.ApiKey, k.MinVersion, k.MaxVersion, w.Min, w.Max)
			}
		}
	}
}

// TestApiVersionsOutOfWindow: a newer client (v4, or any future version)
// gets the v0 layout with UNSUPPORTED_VERSION and the list, then retries.
func TestApiVersionsOutOfWindow(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dialRaw(t, s)
	for _, v := range []int16{4, 127} {
		req := apiVersionsRequest(v)
		corr := c.send(req)
		v0 := apiVersionsRequest(0) // the answer has the v0 layout
		resp := c.recv(v0, corr).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("v%d: error %d, want UNSUPPORTED_VERSION", v, resp.ErrorCode)
		}
		if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 3 {
			t.Fatalf("v%d: advertised %+v", v, resp.ApiKeys)
		}
	}
	// The connection is still usable.
	if resp := c.roundTrip(apiVersionsRequest(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("after the retry: error %d", resp.ErrorCode)
	}
}

func TestApiVersionsInvalidSoftwareName(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dialRaw(t, s)
	req := apiVersionsRequest(3)
	req.ClientSoftwareName = "bad name!"
	if resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("error %d, want INVALID_REQUEST", resp.ErrorCode)
	}
}

// TestOutOfWindowVersionAnswersUnsupportedVersion covers keys other than
// ApiVersions: the answer mirrors the request with error 35 everywhere.
func TestOutOfWindowVersionAnswersUnsupportedVersion(t *testing.T) {
	called := make(chan struct{}, 10)
	s := startServer(t, Config{}, func(s *Server) {
		must(t, s.RegisterHandler(0, func(context.Context, *Conn, kmsg.Request) (kmsg.Response, error) {
			called <- struct{}{}
			return nil, nil
		}))
		must(t, s.RegisterHandler(3, metadataStub))
	})
	c := dialRaw(t, s)

	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(2) // below the RecordBatch v2 floor
	produce.Acks = -1
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 4}}}}
	presp := c.roundTrip(produce).(*kmsg.ProduceResponse)
	if len(presp.Topics) != 1 || presp.Topics[0].Topic != "t" || len(presp.Topics[0].Partitions) != 1 ||
		presp.Topics[0].Partitions[0].Partition != 4 || presp.Topics[0].Partitions[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("produce v2 answer: %+v", presp)
	}

	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(13) // above the window, still decodable
	topic := "orders"
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	mresp := c.roundTrip(meta).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || *mresp.Topics[0].Topic != "orders" || mresp.Topics[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("metadata v13 answer: %+v", mresp)
	}
	if len(called) != 0 {
		t.Fatal("the handler ran for an out-of-window version")
	}
}

// TestUnknownKeyClosesOnlyThatConnection: an unknown key, a known key with
// no handler, a version beyond decoding and garbage each close their
// connection; the server keeps serving others.
func TestUnknownKeyClosesOnlyThatConnection(t *testing.T) {
	s := startServer(t, Config{}, nil)
	bystander := dialRaw(t, s)
	bystander.roundTrip(apiVersionsRequest(3))

	frames := map[string][]byte{}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint32(nil, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	frames["unknown key 999"] = header(999, 0)
	frames["AlterPartition, a controller key absent on purpose"] = header(56, 1)
	frames["Produce without a handler"] = header(0, 9)
	frames["Metadata beyond kmsg"] = header(3, 500)
	frames["negative version"] = header(3, -1)
	frames["truncated header"] = []byte{0, 0, 0, 3, 0, 18, 0}
	// Valid header, body cut short: drop the last byte and fix the size.
	frames["truncated body"] = func() []byte {
		b := kmsg.NewRequestFormatter().AppendRequest(nil, apiVersionsRequest(3), 1)
		b = b[:len(b)-1]
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}()
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, s)
			c.writeRaw(frame)
			c.expectClosed()
		})
	}
	if resp := bystander.roundTrip(apiVersionsRequest(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("bystander: error %d", resp.ErrorCode)
	}
	fresh := dialRaw(t, s)
	fresh.roundTrip(apiVersionsRequest(0))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRegisterHandlerRules(t *testing.T) {
	s, err := NewServer(Config{Addr: "127.0.0.1:0"})
	must(t, err)
	if err := s.RegisterHandler(56, metadataStub); err == nil {
		t.Error("AlterPartition is not in the table but was accepted")
	}
	if err := s.RegisterHandler(18, metadataStub); err == nil {
		t.Error("ApiVersions is built in but was replaced")
	}
	if err := s.RegisterHandler(3, nil); err == nil {
		t.Error("nil handler accepted")
	}
	must(t, s.RegisterHandler(3, metadataStub))
	if err := s.RegisterHandler(3, metadataStub); err == nil {
		t.Error("duplicate handler accepted")
	}
	must(t, s.Start())
	defer s.Close()
	if err := s.RegisterHandler(1, metadataStub); err == nil {
		t.Error("handler registered after Start")
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{},
		{Addr: ":0", MaxConnections: -1},
		{Addr: ":0", MaxRequestBytes: 1 << 31},
		{Addr: ":0", IdleTimeout: -1},
	}
	for i, cfg := range bad {
		if _, err := NewServer(cfg); err == nil {
			t.Errorf("config %d accepted: %+v", i, cfg)
		}
	}
	cfg, err := Config{Addr: ":0", MaxRequestBytes: 1 << 30}.withDefaults()
	must(t, err)
	if cfg.MaxConnections != 4096 || cfg.MaxBufferedRequestBytes != 1<<30 || cfg.MaxInFlightPerConnection != DefaultMaxInFlightPerConnection {
		t.Fatalf("defaults: %+v", cfg)
	}
}

// TestVersionTable checks the table against §3.4 and kmsg: every window is
// one kmsg can encode and decode. Beyond §3.4's 33 rows queen speaks
// DescribeCluster (60), which admin tools ask instead of Metadata,
// KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69),
// KIP-932's share-group keys (76-79, 90-92), OffsetForLeaderEpoch (23),
// without which franz-go ignores leader epochs, and KIP-664's three keys
// that find hanging transactions (61, 65, 66), and the admin keys of
// issue 36: DescribeTopicPartitions (75), DeleteRecords (21), ElectLeaders (43), the SCRAM
// credential keys (50, 51), the client quota keys (48, 49) and the reassignment keys (45, 46).
func TestVersionTable(t *testing.T) {
	if len(supportedVersions) != 56 {
		t.Fatalf("%d keys in the table, §3.4 has 33, DescribeCluster, KIP-848's two, KIP-932's seven, OffsetForLeaderEpoch, KIP-664's three and issue 36's admin keys make 56", len(supportedVersions))
	}
	for key, w := range supportedVersions {
		req := kmsg.RequestForKey(key)
		if req == nil {
			t.Fatalf("key %d unknown to kmsg", key)
		}
		if w.Min < 0 || w.Min > w.Max || w.Max > req.MaxVersion() {
			t.Errorf("%s: window %d..%d, kmsg max %d", KeyName(key), w.Min, w.Max, req.MaxVersion())
		}
	}
	for _, absent := range []int16{52, 56} { // Vote, AlterPartition: controller keys; raft groups elect their own
		if _, ok := SupportedVersions(absent); ok {
			t.Errorf("key %d must stay absent", absent)
		}
	}
}
