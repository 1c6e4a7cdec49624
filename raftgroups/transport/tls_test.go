package transport

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
)

// syncBuf is a log sink safe for the transport's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func tlsNode(t *testing.T, ca *nodetlstest.CA, name string) *nodetls.Config {
	t.Helper()
	cert, key, err := ca.Issue(t.TempDir(), nodetlstest.Leaf{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	c, err := nodetls.Load(nodetls.Files{Cert: cert, Key: key, CA: ca.CertPEM})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startTLS(t *testing.T, tc *nodetls.Config, rcv *receiver, logs *syncBuf) (*Transport, string) {
	t.Helper()
	addr := freeAddr(t)
	f := NewFactory(Config{Token: "tok", Group: 0, TLS: tc, Clock: func() int64 { return 42 },
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	tr := f.Create(config.NodeHostConfig{RaftAddress: addr}, rcv.handle, func(pb.Chunk) bool { return true }).(*Transport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, addr
}

// Peers of one CA stream batches, send chunks and read each other's clock
// over mutual TLS.
func TestMutualTLSDelivers(t *testing.T) {
	ca, err := nodetlstest.NewCA(t.TempDir(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	var rcv receiver
	var logs syncBuf
	_, addr := startTLS(t, tlsNode(t, ca, "a"), &rcv, &logs)
	sender, _ := startTLS(t, tlsNode(t, ca, "b"), &receiver{}, &logs)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendMessageBatch(pb.MessageBatch{Requests: []pb.Message{{ShardID: 1, Type: pb.Heartbeat}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a batch over TLS", func() bool { return rcv.count() == 1 })
	sc, err := sender.GetSnapshotConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.SendChunk(pb.Chunk{ShardID: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ms, err := sender.PeerTime(ctx, addr); err != nil || ms != 42 {
		t.Fatalf("time over TLS: %v %v", ms, err)
	}
	conn.Close()
	if strings.Contains(logs.String(), "TLS") {
		t.Fatalf("TLS warnings between good peers:\n%s", logs.String())
	}
}

// A sender with a certificate from another CA, or without TLS, is refused
// by the listener before any raft byte, and both sides say so.
func TestTLSRefusesStrangers(t *testing.T) {
	dir := t.TempDir()
	ca, _ := nodetlstest.NewCA(dir, "cluster")
	other, _ := nodetlstest.NewCA(dir, "other")
	var rcv receiver
	var srvLogs syncBuf
	server, addr := startTLS(t, tlsNode(t, ca, "a"), &rcv, &srvLogs)

	for _, tc := range []struct {
		name string
		tls  *nodetls.Config
		want string
	}{
		{"another CA", tlsNode(t, other, "stranger"), "TLS with a peer failed"},
		{"plaintext", nil, "refused this node's plaintext request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := server.TLSRefused()
			var logs syncBuf
			sender, _ := startTLS(t, tc.tls, &receiver{}, &logs)
			if _, err := sender.GetConnection(context.Background(), addr); err == nil {
				t.Fatal("the stream was accepted")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := sender.PeerTime(ctx, addr); err == nil {
				t.Fatal("the clock route answered")
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Fatalf("sender log lacks %q:\n%s", tc.want, logs.String())
			}
			if tc.tls != nil {
				waitFor(t, "the listener to count the refusal", func() bool { return server.TLSRefused() > before })
				waitFor(t, "the listener to log the refusal", func() bool {
					return strings.Contains(srvLogs.String(), "refused a peer's connection: its TLS handshake failed")
				})
			}
		})
	}
	if rcv.count() != 0 {
		t.Fatalf("%d batches got through", rcv.count())
	}
}
