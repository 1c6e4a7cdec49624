package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
)

// modeOf says how a connection GetConnection returned streams.
func modeOf(t *testing.T, c raftio.IConnection) string {
	t.Helper()
	s, ok := c.(*stream)
	switch {
	case !ok:
		t.Fatalf("GetConnection returned a %T", c)
	case s.conn != nil:
		return "raw"
	case s.pw != nil:
		return "chunked"
	}
	return "none"
}

// entryBatch is a Replicate batch carrying entries whose bytes say which
// batch and entry they are, so a receiver can check every byte arrived.
func entryBatch(i, entries, size int) pb.MessageBatch {
	m := pb.Message{ShardID: 1, From: 1, To: 2, Type: pb.Replicate, Term: uint64(i)}
	for e := 0; e < entries; e++ {
		m.Entries = append(m.Entries, pb.Entry{Index: uint64(e), Cmd: bytes.Repeat([]byte{byte(i + e)}, size)})
	}
	return pb.MessageBatch{SourceAddress: "sender", Requests: []pb.Message{m}}
}

func checkBatch(t *testing.T, got pb.MessageBatch, i, entries, size int) {
	t.Helper()
	want := entryBatch(i, entries, size)
	if len(got.Requests) != 1 || got.Requests[0].Term != uint64(i) || len(got.Requests[0].Entries) != entries {
		t.Fatalf("batch %d arrived as term %d with %d entries", i, got.Requests[0].Term, len(got.Requests[0].Entries))
	}
	for e, ent := range got.Requests[0].Entries {
		if !bytes.Equal(ent.Cmd, want.Requests[0].Entries[e].Cmd) {
			t.Fatalf("batch %d entry %d: bytes differ", i, e)
		}
	}
}

// Small and large frames (one of 3 MiB: several write pieces, more than
// the receiver's read buffer) arrive whole and in order on a raw stream.
func TestRawStreamDeliversInOrder(t *testing.T) {
	var rcv receiver
	server, addr := startTransport(t, "tok", 3, &rcv, io.Discard)
	sender, _ := startTransport(t, "tok", 3, &receiver{}, io.Discard)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if m := modeOf(t, conn); m != "raw" {
		t.Fatalf("stream is %s, want raw", m)
	}
	shape := func(i int) (entries, size int) {
		if i%50 == 49 {
			return 3, 1 << 20
		}
		return 1 + i%4, 100 + i*7
	}
	const n = 200
	for i := 0; i < n; i++ {
		e, sz := shape(i)
		if err := conn.SendMessageBatch(entryBatch(i, e, sz)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every batch", func() bool { return rcv.count() == n })
	for i, b := range rcv.batches {
		e, sz := shape(i)
		checkBatch(t, b, i, e, sz)
	}
	if sender.LastContact(addr).IsZero() || server.LastContact("sender").IsZero() {
		t.Fatal("contact not recorded")
	}
	// The sender closing the stream ends the receiver's handler.
	conn.Close()
	waitFor(t, "the receiver to drop the stream", func() bool {
		server.streamsMu.Lock()
		defer server.streamsMu.Unlock()
		return len(server.rawIn) == 0
	})
	if err := conn.SendMessageBatch(entryBatch(0, 1, 1)); err == nil {
		t.Fatal("send on a closed stream succeeded")
	}
}

// The receiver ending a raw stream (here: its transport closes) fails the
// sender's next sends at once, with the reason, and Close ends every raw
// stream on both sides, the goroutines with them.
func TestRawStreamEndsWithEitherSide(t *testing.T) {
	var rcv receiver
	server, addr := startTransport(t, "", 0, &rcv, io.Discard)
	sender, senderAddr := startTransport(t, "", 0, &receiver{}, io.Discard)
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendMessageBatch(entryBatch(0, 1, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first batch", func() bool { return rcv.count() == 1 })
	server.Close()
	waitFor(t, "the stream to end", func() bool { return conn.(*stream).why.Load() != nil })
	if err := conn.SendMessageBatch(entryBatch(1, 1, 10)); !errors.Is(err, errStreamEnded) {
		t.Fatalf("send after the peer went: %v, want errStreamEnded", err)
	}

	// A stream each way between two live transports; closing one ends both.
	back, _ := startTransport(t, "", 0, &receiver{}, io.Discard)
	in, err := back.GetConnection(context.Background(), senderAddr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sender.GetConnection(context.Background(), mustAddr(t, back))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the incoming raw stream", func() bool {
		sender.streamsMu.Lock()
		defer sender.streamsMu.Unlock()
		return len(sender.rawIn) == 1
	})
	closed := make(chan struct{})
	go func() { sender.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if len(sender.rawIn) != 0 || len(sender.streams) != 0 {
		t.Fatalf("after Close: %d incoming, %d outgoing streams", len(sender.rawIn), len(sender.streams))
	}
	if err := out.SendMessageBatch(entryBatch(0, 1, 10)); !errors.Is(err, errTransportClosed) {
		t.Fatalf("outgoing send after Close: %v", err)
	}
	waitFor(t, "the peer's stream to end", func() bool { return in.SendMessageBatch(entryBatch(0, 1, 10)) != nil })
	if _, err := sender.GetConnection(context.Background(), addr); err == nil {
		t.Fatal("a closed transport opened a stream")
	}
}

// mustAddr is a started transport's listen address.
func mustAddr(t *testing.T, tr *Transport) string {
	t.Helper()
	return tr.listen
}

// A wrong token is refused from the raw request's headers: 401, no 101,
// the connection closed, counted once on each side and no chunked retry.
func TestRawStreamRefusesAWrongToken(t *testing.T) {
	var rcv receiver
	server, addr := startTransport(t, "right", 0, &rcv, io.Discard)
	sender, _ := startTransport(t, "wrong", 0, &receiver{}, io.Discard)
	if _, err := sender.GetConnection(context.Background(), addr); !errors.Is(err, ErrRefused) {
		t.Fatalf("want ErrRefused, got %v", err)
	}
	if server.Refused() != 1 || sender.Rejected() != 1 {
		t.Fatalf("refused=%d rejected=%d, want 1 and 1", server.Refused(), sender.Rejected())
	}
	if _, old := sender.oldPeers.Load(addr); old {
		t.Fatal("a refusal was taken for an older peer")
	}

	// By hand: the frame after the request is never read.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	head := "POST " + rawPath + " HTTP/1.1\r\nHost: x\r\n" + TokenHeader + ": nope\r\n" + GroupHeader +
		": 0\r\nConnection: Upgrade\r\nUpgrade: " + rawProto + "\r\nContent-Length: 0\r\n\r\n"
	b := entryBatch(0, 1, 10)
	body := must(b.Marshal())
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := io.WriteString(c, head+string(frame)+string(body)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(resp.Body) // to EOF: the server hangs up
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(rest), "bad raft token") {
		t.Fatalf("got %d %q", resp.StatusCode, rest)
	}
	if rcv.count() != 0 {
		t.Fatal("a batch was delivered")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// Over mutual TLS the stream is raw too, on a TLS connection that
// negotiated HTTP/1.1.
func TestRawStreamOverTLS(t *testing.T) {
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
	tc, ok := conn.(*stream).conn.(*tls.Conn)
	if !ok {
		t.Fatalf("raw stream over %T, want TLS", conn.(*stream).conn)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("negotiated %q", p)
	}
	for i := 0; i < 20; i++ {
		if err := conn.SendMessageBatch(entryBatch(i, 2, 300<<10)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the batches over TLS", func() bool { return rcv.count() == 20 })
	for i, b := range rcv.batches {
		checkBatch(t, b, i, 2, 300<<10)
	}
	conn.Close()
	if strings.Contains(logs.String(), "TLS") {
		t.Fatalf("TLS warnings between good peers:\n%s", logs.String())
	}
}

// oldReceiver serves raft streams as the build before raw streams did:
// the chunked route only, so rawPath is its mux's 404. It counts the
// requests made to rawPath.
func oldReceiver(t *testing.T, rcv *receiver) (addr string, rawTries *atomic.Int64) {
	t.Helper()
	addr = freeAddr(t)
	f := NewFactory(Config{Group: 0, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tr := f.Create(config.NodeHostConfig{RaftAddress: addr}, rcv.handle, func(pb.Chunk) bool { return true }).(*Transport)
	mux := http.NewServeMux()
	mux.Handle(streamPath, tr.guard(tr.serveStream))
	rawTries = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == rawPath {
			rawTries.Add(1)
		}
		mux.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return addr, rawTries
}

// A new sender streams chunked to a node of the older build, which answers
// 404 for raw streams, and does not ask it again for a while.
func TestRawFallsBackToChunkedForAnOlderPeer(t *testing.T) {
	var rcv receiver
	addr, rawTries := oldReceiver(t, &rcv)
	sender, _ := startTransport(t, "", 0, &receiver{}, io.Discard)
	for i := 0; i < 3; i++ {
		conn, err := sender.GetConnection(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		if m := modeOf(t, conn); m != "chunked" {
			t.Fatalf("stream %d is %s", i, m)
		}
		if err := conn.SendMessageBatch(entryBatch(i, 1, 1000)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the batch", func() bool { return rcv.count() == i+1 })
		conn.Close()
	}
	for i, b := range rcv.batches {
		checkBatch(t, b, i, 1, 1000)
	}
	if n := rawTries.Load(); n != 1 {
		t.Fatalf("asked the older peer for a raw stream %d times, want once", n)
	}
	// Once the memory expires (the peer may have been upgraded) raw is
	// tried again.
	sender.oldPeers.Store(addr, time.Now().Add(-time.Second))
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if n := rawTries.Load(); n != 2 {
		t.Fatalf("raw asked %d times after the memory expired, want 2", n)
	}
}

// A sender of the older build (chunked POSTs only) still reaches a node
// that serves raw streams.
func TestOlderSenderReachesANewReceiver(t *testing.T) {
	var rcv receiver
	_, addr := startTransport(t, "tok", 0, &rcv, io.Discard)
	old, _ := startTimedWith(t, &receiver{}, Config{Token: "tok", chunkedOnly: true})
	conn, err := old.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if m := modeOf(t, conn); m != "chunked" {
		t.Fatalf("stream is %s", m)
	}
	for i := 0; i < 10; i++ {
		if err := conn.SendMessageBatch(entryBatch(i, 2, 5000)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the batches", func() bool { return rcv.count() == 10 })
	for i, b := range rcv.batches {
		checkBatch(t, b, i, 2, 5000)
	}
	conn.Close()
}

// The raw route answers a request that does not ask for the upgrade 426,
// which a sender takes as "stream chunked", and never hijacks it.
func TestRawRouteNeedsTheUpgrade(t *testing.T) {
	_, addr := startTransport(t, "", 0, &receiver{}, io.Discard)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+rawPath, nil)
	req.Header.Set(GroupHeader, "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("got %s", resp.Status)
	}
}

// Close cuts short a raw stream still waiting for its peer's answer, and
// so does the caller's context: neither waits out Timeouts.Open (5 s).
func TestRawOpenEndsWithCloseOrItsContext(t *testing.T) {
	hole := blackHole(t, false)
	sender, _ := startTransport(t, "", 0, &receiver{}, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := sender.GetConnection(ctx, hole); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("open with a 200 ms context: %v after %v", err, time.Since(start))
	}
	opened := make(chan error, 1)
	go func() {
		_, err := sender.GetConnection(context.Background(), hole)
		opened <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the open reach the wait; not synchronisation of the outcome
	sender.Close()
	select {
	case err := <-opened:
		if !errors.Is(err, errTransportClosed) {
			t.Fatalf("open during Close: %v, want errTransportClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not end an open waiting for its answer")
	}
}
