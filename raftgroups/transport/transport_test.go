package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type receiver struct {
	mu      sync.Mutex
	batches []pb.MessageBatch
}

func (r *receiver) handle(b pb.MessageBatch) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

func startTransport(t *testing.T, token string, group int, rcv *receiver, logs io.Writer) (*Transport, string) {
	t.Helper()
	addr := freeAddr(t)
	f := NewFactory(Config{Token: token, Group: group, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	tr := f.Create(config.NodeHostConfig{RaftAddress: addr}, rcv.handle, func(pb.Chunk) bool { return true }).(*Transport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, addr
}

func TestBatchDeliveredWithTheRightToken(t *testing.T) {
	var rcv receiver
	_, addr := startTransport(t, "s3cret", 2, &rcv, io.Discard)
	sender, _ := startTransport(t, "s3cret", 2, &receiver{}, io.Discard)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	batch := pb.MessageBatch{DeploymentId: 7, Requests: []pb.Message{{ShardID: 3, From: 1, To: 2, Type: pb.Heartbeat}}}
	for i := 0; i < 3; i++ {
		batch.Requests[0].Term = uint64(i)
		if err := conn.SendMessageBatch(batch); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three batches", func() bool { return rcv.count() == 3 })
	for i, b := range rcv.batches {
		if b.Requests[0].ShardID != 3 || b.Requests[0].Term != uint64(i) {
			t.Fatalf("batch %d delivered as %+v", i, b)
		}
	}
	if sender.LastContact(addr).IsZero() {
		t.Fatal("accepted stream not recorded as contact")
	}
	conn.Close()
	if err := conn.SendMessageBatch(batch); err == nil {
		t.Fatal("send on a closed stream succeeded")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A receiver that goes away ends the stream: the next sends fail, so
// dragonboat drops the connection and dials again.
func TestStreamFailsWhenThePeerGoesAway(t *testing.T) {
	var rcv receiver
	server, addr := startTransport(t, "", 0, &rcv, io.Discard)
	sender, _ := startTransport(t, "", 0, &receiver{}, io.Discard)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	batch := pb.MessageBatch{Requests: []pb.Message{{ShardID: 1, Type: pb.Heartbeat}}}
	if err := conn.SendMessageBatch(batch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first batch", func() bool { return rcv.count() == 1 })
	server.Close()
	waitFor(t, "a send to fail", func() bool { return conn.SendMessageBatch(batch) != nil })
}

// A stream is one long request: a batch larger than the receiver's limit
// ends it rather than being read.
func TestOversizedBatchEndsTheStream(t *testing.T) {
	var rcv receiver
	addr := freeAddr(t)
	f := NewFactory(Config{Group: 0, MaxBodyBytes: 1 << 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr := f.Create(config.NodeHostConfig{RaftAddress: addr}, rcv.handle, func(pb.Chunk) bool { return true }).(*Transport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	sender, _ := startTransport(t, "", 0, &receiver{}, io.Discard)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	big := pb.MessageBatch{Requests: []pb.Message{{ShardID: 1, Entries: []pb.Entry{{Cmd: make([]byte, 4<<10)}}}}}
	_ = conn.SendMessageBatch(big)
	waitFor(t, "the stream to end", func() bool { return conn.SendMessageBatch(pb.MessageBatch{}) != nil })
	if rcv.count() != 0 {
		t.Fatalf("oversized batch delivered")
	}
}

func TestWrongTokenIsRefusedBeforeTheBodyIsRead(t *testing.T) {
	var rcv receiver
	server, addr := startTransport(t, "right", 0, &rcv, io.Discard)
	var logs bytes.Buffer
	sender, _ := startTransport(t, "wrong", 0, &receiver{}, &logs)
	// The stream is refused when it opens, before any batch is sent.
	_, err := sender.GetConnection(context.Background(), addr)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("want ErrRefused, got %v", err)
	}
	if !strings.Contains(logs.String(), "refused this node's QUEEN_RAFT_TOKEN") {
		t.Fatalf("sender did not warn: %q", logs.String())
	}
	if rcv.count() != 0 || server.Refused() != 1 || sender.Rejected() != 1 {
		t.Fatalf("delivered=%d refused=%d rejected=%d", rcv.count(), server.Refused(), sender.Rejected())
	}

	// A raw request with a body that would not even unmarshal gets 401, not
	// 400: the body is never looked at.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+streamPath, strings.NewReader("garbage"))
	req.Header.Set(TokenHeader, "nope")
	req.Header.Set(GroupHeader, "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "bad raft token") {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
}

func TestWrongGroupPortIsMisdirected(t *testing.T) {
	_, addr := startTransport(t, "", 1, &receiver{}, io.Discard)
	sender, _ := startTransport(t, "", 2, &receiver{}, io.Discard)
	_, err := sender.GetConnection(context.Background(), addr)
	if err == nil || !strings.Contains(err.Error(), "421") {
		t.Fatalf("want 421, got %v", err)
	}
}

func TestDeadPeerFailsFast(t *testing.T) {
	sender, _ := startTransport(t, "", 0, &receiver{}, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sender.GetConnection(ctx, freeAddr(t)); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
}

// A sender does not put a batch over its limit on the wire (the receiver
// would end the stream at it, and raft would resend it forever); it drops
// it, counts it, and the stream goes on carrying the other messages.
func TestSenderDropsABatchOverItsLimit(t *testing.T) {
	var rcv receiver
	_, addr := startTransport(t, "", 0, &rcv, io.Discard)
	var logs bytes.Buffer
	f := NewFactory(Config{Group: 0, MaxBodyBytes: 1 << 10, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	sender := f.Create(config.NodeHostConfig{RaftAddress: freeAddr(t)}, (&receiver{}).handle, func(pb.Chunk) bool { return true }).(*Transport)
	t.Cleanup(func() { sender.Close() })
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	big := pb.MessageBatch{Requests: []pb.Message{{ShardID: 1, Entries: []pb.Entry{{Cmd: make([]byte, 4<<10)}}}}}
	if err := conn.SendMessageBatch(big); err != nil {
		t.Fatal(err)
	}
	if err := conn.SendMessageBatch(pb.MessageBatch{Requests: []pb.Message{{ShardID: 2, Type: pb.Heartbeat}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the small batch", func() bool { return rcv.count() == 1 })
	if rcv.batches[0].Requests[0].ShardID != 2 || sender.Oversized() != 1 {
		t.Fatalf("delivered shard %d, oversized %d", rcv.batches[0].Requests[0].ShardID, sender.Oversized())
	}
	if !strings.Contains(logs.String(), "larger than a peer accepts") {
		t.Fatalf("no error logged: %q", logs.String())
	}
}

// The time route answers this node's clock to a peer with the token and
// refuses one without.
func TestPeerTimeNeedsTheToken(t *testing.T) {
	addr := freeAddr(t)
	f := NewFactory(Config{Token: "s3cret", Group: 0, Clock: func() int64 { return 1234567 }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	server := f.Create(config.NodeHostConfig{RaftAddress: addr}, (&receiver{}).handle, func(pb.Chunk) bool { return true }).(*Transport)
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	good, _ := startTransport(t, "s3cret", 0, &receiver{}, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ms, err := good.PeerTime(ctx, addr); err != nil || ms != 1234567 {
		t.Fatalf("got %d, %v", ms, err)
	}
	bad, _ := startTransport(t, "wrong", 0, &receiver{}, io.Discard)
	if _, err := bad.PeerTime(ctx, addr); !errors.Is(err, ErrRefused) {
		t.Fatalf("want ErrRefused, got %v", err)
	}
}
