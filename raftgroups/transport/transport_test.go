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
	if err := conn.SendMessageBatch(batch); err != nil {
		t.Fatal(err)
	}
	if rcv.count() != 1 || rcv.batches[0].Requests[0].ShardID != 3 {
		t.Fatalf("batch not delivered: %+v", rcv.batches)
	}
	if sender.LastContact(addr).IsZero() {
		t.Fatal("successful send not recorded")
	}
}

func TestWrongTokenIsRefusedBeforeTheBodyIsRead(t *testing.T) {
	var rcv receiver
	server, addr := startTransport(t, "right", 0, &rcv, io.Discard)
	var logs bytes.Buffer
	sender, _ := startTransport(t, "wrong", 0, &receiver{}, &logs)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	err = conn.SendMessageBatch(pb.MessageBatch{Requests: []pb.Message{{ShardID: 1}}})
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
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+batchPath, strings.NewReader("garbage"))
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
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	err = conn.SendMessageBatch(pb.MessageBatch{})
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
