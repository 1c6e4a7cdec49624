package transport

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
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
//	for i in 1 2 3 4 5 6; do go test -run '^$' -bench BenchmarkStream ./raftgroups/transport/; done
func BenchmarkStream(b *testing.B) {
	ack := pb.MessageBatch{DeploymentId: 1, SourceAddress: "127.0.0.1:7101", BinVer: 210,
		Requests: []pb.Message{{ShardID: 3, From: 2, To: 1, Type: pb.ReplicateResp, Term: 7, LogIndex: 1 << 20}}}
	sizes := []struct {
		name  string
		batch pb.MessageBatch
	}{{"ack", ack}, {"small", benchBatch(4, 1<<10)}, {"1MiB", benchBatch(16, 64<<10)}}
	// Size-major, so that a size's two modes run back to back, under the
	// same load from whatever else the machine runs.
	// With "tls", both ends hold certificates of one CA (mutual TLS).
	var tc *nodetls.Config
	for _, sz := range sizes {
		for _, mode := range []string{"chunked", "raw", "chunked-tls", "raw-tls"} {
			b.Run(mode+"/"+sz.name, func(b *testing.B) {
				if strings.HasSuffix(mode, "-tls") && tc == nil {
					tc = benchTLS(b)
				}
				var use *nodetls.Config
				if strings.HasSuffix(mode, "-tls") {
					use = tc
				}
				benchStream(b, strings.HasPrefix(mode, "chunked"), use, sz.batch)
			})
		}
	}
}

// benchTLS is a node's mutual TLS configuration, from a CA made for it.
func benchTLS(b *testing.B) *nodetls.Config {
	dir, err := os.MkdirTemp("", "queen-bench-tls")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ca, err := nodetlstest.NewCA(dir, "cluster")
	if err != nil {
		b.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, nodetlstest.Leaf{Name: "node"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := nodetls.Load(nodetls.Files{Cert: cert, Key: key, CA: ca.CertPEM})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func benchStream(b *testing.B, chunked bool, tc *nodetls.Config, batch pb.MessageBatch) {
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
	rcv := start(Config{Token: "tok", TLS: tc}, func(pb.MessageBatch) { got.Add(1) })
	defer rcv.Close()
	snd := start(Config{Token: "tok", TLS: tc, chunkedOnly: chunked}, func(pb.MessageBatch) {})
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
