package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

// fastTimeouts keep the tests short; every bound is what is tested, not
// its default value.
var fastTimeouts = Timeouts{Dial: 500 * time.Millisecond, Open: 500 * time.Millisecond, Write: 500 * time.Millisecond,
	Chunk: time.Second, Idle: time.Second, Stall: 500 * time.Millisecond}

func startTimed(t *testing.T, rcv *receiver, to Timeouts) (*Transport, string) {
	t.Helper()
	return startTimedWith(t, rcv, Config{Timeouts: to})
}

// startTimedWith starts a transport of cfg, logging nowhere.
func startTimedWith(t *testing.T, rcv *receiver, cfg Config) (*Transport, string) {
	t.Helper()
	addr := freeAddr(t)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	f := NewFactory(cfg)
	tr := f.Create(config.NodeHostConfig{RaftAddress: addr}, rcv.handle, func(pb.Chunk) bool { return true }).(*Transport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, addr
}

// blackHole accepts connections and then neither reads nor answers, as a
// peer behind a dropping firewall or a frozen process does. With answer200
// it reads a request's headers and answers 200 first (101 to a raw
// stream's request), as a stream receiver that then stops reading.
func blackHole(t *testing.T, answer200 bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if answer200 {
				go func() {
					req, err := http.ReadRequest(bufio.NewReader(c))
					switch {
					case err != nil:
					case req.Header.Get("Upgrade") == rawProto:
						_, _ = io.WriteString(c, rawAnswer) // a raw stream's receiver that then stops reading
					default:
						_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
					}
				}()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// within runs f and fails the test unless it returns an error within limit.
func within(t *testing.T, what string, limit time.Duration, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("%s: succeeded against a black hole", what)
		}
		t.Logf("%s gave up after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
	case <-time.After(limit):
		t.Fatalf("%s: still blocked after %v", what, limit)
	}
}

// keepsDelivering sends heartbeats to a healthy peer until stop is closed
// and fails if any send fails or stalls: a black-holed peer must not hold
// up the others.
func keepsDelivering(t *testing.T, sender *Transport, addr string, rcv *receiver, stop <-chan struct{}) <-chan error {
	out := make(chan error, 1)
	go func() {
		conn, err := sender.GetConnection(context.Background(), addr)
		if err != nil {
			out <- err
			return
		}
		defer conn.Close()
		sent := 0
		for {
			select {
			case <-stop:
				deadline := time.Now().Add(5 * time.Second)
				for rcv.count() < sent && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if rcv.count() < sent {
					out <- fmt.Errorf("healthy peer got %d of %d batches", rcv.count(), sent)
					return
				}
				out <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
			start := time.Now()
			if err := conn.SendMessageBatch(pb.MessageBatch{Requests: []pb.Message{{ShardID: 1, Type: pb.Heartbeat}}}); err != nil {
				out <- fmt.Errorf("send to the healthy peer: %w", err)
				return
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				out <- fmt.Errorf("a send to the healthy peer took %v", d)
				return
			}
			sent++
		}
	}()
	return out
}

// Every way of sending to a peer that accepts and never reads or answers
// gives up within its bound, while another peer keeps receiving.
func TestSenderGivesUpOnABlackHoledPeer(t *testing.T) {
	var healthy receiver
	_, healthyAddr := startTimed(t, &healthy, fastTimeouts)
	sender, _ := startTimed(t, &receiver{}, fastTimeouts)
	stop := make(chan struct{})
	result := keepsDelivering(t, sender, healthyAddr, &healthy, stop)

	hole := blackHole(t, false)
	within(t, "opening a stream", 3*time.Second, func() error {
		_, err := sender.GetConnection(context.Background(), hole)
		return err
	})
	within(t, "sending a snapshot chunk", 4*time.Second, func() error {
		c, err := sender.GetSnapshotConnection(context.Background(), hole)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.SendChunk(pb.Chunk{ShardID: 1, Data: make([]byte, 2<<20)})
	})

	// A peer that accepts the stream and then stops reading: frames fill
	// the socket buffers, then a send fails, raw or chunked.
	stallsOut(t, sender)
	chunked, _ := startTimedWith(t, &receiver{}, Config{Timeouts: fastTimeouts, chunkedOnly: true})
	stallsOut(t, chunked)
	close(stop)
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

// stallsOut opens a stream to a peer that accepts it and never reads, and
// checks that sending to it fails within the write bound, with errStalled.
func stallsOut(t *testing.T, sender *Transport) {
	t.Helper()
	conn, err := sender.GetConnection(context.Background(), blackHole(t, true))
	if err != nil {
		t.Fatal(err)
	}
	big := pb.MessageBatch{Requests: []pb.Message{{ShardID: 1, Type: pb.Replicate, Entries: []pb.Entry{{Cmd: make([]byte, 1<<20)}}}}}
	var last error
	within(t, "writing frames to a peer that stopped reading", 4*time.Second, func() error {
		for {
			if last = conn.SendMessageBatch(big); last != nil {
				return last
			}
		}
	})
	if !errors.Is(last, errStalled) {
		t.Fatalf("want errStalled, got %v", last)
	}
}

// rawRequest opens a connection to addr and writes a request's headers
// (and the start of its body), then leaves it stalled; the returned channel
// yields once the server has closed the connection.
func rawRequest(t *testing.T, addr, head, body string) <-chan struct{} {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c) // the answer, then EOF when the server hangs up
		close(closed)
	}()
	return closed
}

// The receiving end does not keep a stalled sender's connection (and its
// frame buffer) forever: a frame or chunk that stops arriving halfway, and
// a stream with no frame for longer than the idle bound, are dropped.
func TestReceiverDropsStalledSenders(t *testing.T) {
	_, addr := startTimed(t, &receiver{}, fastTimeouts)
	const rawUpgrade = "Connection: Upgrade\r\nUpgrade: " + rawProto + "\r\nContent-Length: 0"
	headers := func(path, length string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + GroupHeader + ": 0\r\n" + length + "\r\n\r\n"
	}
	cases := map[string]<-chan struct{}{
		// a frame announced as 1000 bytes of which 10 arrive
		"half a frame": rawRequest(t, addr, headers(streamPath, "Transfer-Encoding: chunked"), "e\r\n\x00\x00\x03\xe8"+strings.Repeat("x", 10)+"\r\n"),
		"no frame":     rawRequest(t, addr, headers(streamPath, "Transfer-Encoding: chunked"), ""),
		"half a chunk": rawRequest(t, addr, headers(chunkPath, "Content-Length: 1000"), strings.Repeat("x", 10)),
		// the same on a raw stream, its frames after the request
		"raw: half a frame": rawRequest(t, addr, headers(rawPath, rawUpgrade), "\x00\x00\x03\xe8"+strings.Repeat("x", 10)),
		"raw: no frame":     rawRequest(t, addr, headers(rawPath, rawUpgrade), ""),
	}
	limit := time.After(5 * time.Second)
	for name, closed := range cases {
		select {
		case <-closed:
		case <-limit:
			t.Fatalf("%s: the receiver still holds the connection after 5 s", name)
		}
	}
}
