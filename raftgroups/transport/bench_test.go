package transport

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// benchBatch is a leader's Replicate batch as raft sends it: entries of
// size bytes each with the fields dragonboat fills in.
func benchBatch(entries, size int) pb.MessageBatch {
	m := pb.Message{ShardID: 3, From: 1, To: 2, Type: pb.Replicate, Term: 7, LogTerm: 7, LogIndex: 1 << 20, Commit: 1<<20 - 4}
	for e := 0; e < entries; e++ {
		m.Entries = append(m.Entries, pb.Entry{Term: 7, Index: 1<<20 + uint64(e), Type: pb.ApplicationEntry,
			Key: uint64(e), ClientID: 0x1234567890, SeriesID: uint64(e), RespondedTo: uint64(e), Cmd: make([]byte, size)})
	}
	return pb.MessageBatch{DeploymentId: 1, SourceAddress: "127.0.0.1:7100", BinVer: 210, Requests: []pb.Message{m}}
}

// BenchmarkStream sends frames over loopback on a chunked and on a raw
// stream, both ends in this process: ns/op and MB/s are the sender's
// throughput up to the receiver having unmarshalled every frame, and
// cpu-ns/op the process's CPU (user and system, both ends, the GC
// included) per frame. "ack" is a follower's ReplicateResp, "small" a
// leader's batch of four 1 KiB records, "1MiB" sixteen 64 KiB entries.
//
//	go test -run '^$' -bench BenchmarkStream -count 6 ./raftgroups/transport/
func BenchmarkStream(b *testing.B) {
	ack := pb.MessageBatch{DeploymentId: 1, SourceAddress: "127.0.0.1:7101", BinVer: 210,
		Requests: []pb.Message{{ShardID: 3, From: 2, To: 1, Type: pb.ReplicateResp, Term: 7, LogIndex: 1 << 20}}}
	sizes := []struct {
		name  string
		batch pb.MessageBatch
	}{{"ack", ack}, {"small", benchBatch(4, 1<<10)}, {"1MiB", benchBatch(16, 64<<10)}}
	for _, mode := range []string{"chunked", "raw"} {
		for _, sz := range sizes {
			b.Run(mode+"/"+sz.name, func(b *testing.B) { benchStream(b, mode == "chunked", sz.batch) })
		}
	}
}

func benchStream(b *testing.B, chunked bool, batch pb.MessageBatch) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var got atomic.Int64
	start := func(cfg Config, mh func(pb.MessageBatch)) *Transport {
		l, err := netListen()
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cfg.Logger = quiet
		tr := NewFactory(cfg).Create(config.NodeHostConfig{RaftAddress: addr}, mh, func(pb.Chunk) bool { return true }).(*Transport)
		if err := tr.Start(); err != nil {
			b.Fatal(err)
		}
		return tr
	}
	rcv := start(Config{Token: "tok"}, func(pb.MessageBatch) { got.Add(1) })
	defer rcv.Close()
	snd := start(Config{Token: "tok", chunkedOnly: chunked}, func(pb.MessageBatch) {})
	defer snd.Close()
	conn, err := snd.GetConnection(context.Background(), rcv.listen)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if (conn.(*stream).conn != nil) == chunked {
		b.Fatal("the stream is not of the mode benchmarked")
	}
	b.SetBytes(int64(4 + batch.Size()))
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := conn.SendMessageBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for got.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d frames received", got.Load(), b.N)
		}
		time.Sleep(50 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU time so far, user and system, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
