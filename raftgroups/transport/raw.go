package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// A raw stream carries the same frames as a chunked one (stream.go), but
// straight on the connection. The sender dials the peer (TLS when the
// node has it) and sends one HTTP/1.1 request, POST rawPath with
// "Connection: Upgrade" and "Upgrade: queen-raft/1"; the receiver runs
// the same checks as for every raft route (guard: method, token in
// constant time, group; TLS was the listener's), takes the connection
// over from net/http (Hijack), answers "101 Switching Protocols" and reads
// frames from it through a 64 KiB bufio.Reader. The sender writes each
// frame, length and body in one reused buffer, with one write per
// writePiece, each bounded by Timeouts.Write as a chunked stream's pieces
// are. Nothing goes from receiver to sender after the 101: the sender's
// one goroutine per stream (drain) only notices the connection end.
//
// This takes out what a chunked stream costs per frame: the io.Pipe's
// hand-off to net/http's writing goroutine, the chunk framing on both
// ends, and the reads through net/http's chunked reader
// (docs/benchmarks.md, "Raw raft streams").
//
// A node of an older build has no rawPath and answers 404: the sender
// then opens a chunked stream instead and keeps streaming chunked to that
// peer for oldPeerFor before it tries raw again (the peer may have been
// upgraded). The chunked route stays served, so an older sender reaches a
// newer receiver as before. A connection upgraded this way must be
// HTTP/1.1: the listener and the client offer only http/1.1 in TLS
// (nodetls; the server's TLSNextProto is empty, so net/http never turns
// HTTP/2 on), and a request that is not HTTP/1.1 is answered 505, which
// the sender also takes as "stream chunked".

const (
	rawPath  = "/raft/v1/raw"
	rawProto = "queen-raft/1"
	// oldPeerFor is how long a peer that did not take a raw stream gets
	// chunked ones before a raw one is tried again.
	oldPeerFor = time.Minute
	// rawReadBuf is the receiver's read buffer: one read for many small
	// frames, and large frames read straight into the frame buffer.
	rawReadBuf = 64 << 10
)

// errNoRaw is openRaw's answer when the peer does not take raw streams.
var errNoRaw = errors.New("raft transport: the peer does not take raw streams")

// rawAnswer is the receiver's whole answer to a raw stream's request.
const rawAnswer = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + rawProto + "\r\n\r\n"

// rawFor reports whether a stream to target should be tried raw.
func (t *Transport) rawFor(target string) bool {
	if t.cfg.chunkedOnly {
		return false
	}
	if v, ok := t.oldPeers.Load(target); ok {
		if time.Now().Before(v.(time.Time)) {
			return false
		}
		t.oldPeers.CompareAndDelete(target, v)
	}
	return true
}

// noteOldPeer remembers that target did not take a raw stream.
func (t *Transport) noteOldPeer(target string, why error) {
	t.oldPeers.Store(target, time.Now().Add(oldPeerFor))
	t.cfg.Logger.Debug("raft: the peer does not take raw streams (an older build?); streaming to it chunked",
		"peer", target, "group", t.cfg.Group, "for", oldPeerFor, "why", why)
}

// openRaw dials target and upgrades the connection to a raw stream. It
// returns an error wrapping errNoRaw when the peer answered that it has
// no raw streams, ErrRefused when it refused this node's token. Dialling,
// the TLS handshake and the answer are bounded by Timeouts.Open in all,
// the dial also by Timeouts.Dial.
func (t *Transport) openRaw(ctx context.Context, target string) (*stream, error) {
	if t.cfg.Drop != nil {
		if err := t.cfg.Drop(target); err != nil {
			return nil, err
		}
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("raft transport group %d: stream to %s: %w", t.cfg.Group, target, err)
	}
	deadline := time.Now().Add(t.cfg.Timeouts.Open)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	stopClosing := context.AfterFunc(t.ctx, cancel) // Close cuts the wait short
	defer stopClosing()
	d := net.Dialer{Timeout: t.cfg.Timeouts.Dial, KeepAlive: 10 * time.Second}
	tcp, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		if t.ctx.Err() != nil {
			return nil, errTransportClosed
		}
		return nil, fmt.Errorf("raft transport group %d: dial %s: %w", t.cfg.Group, target, err)
	}
	// The deadline bounds every read and write of the upgrade; ctx ending
	// first (the caller gave up, the transport closes) moves it to now.
	_ = tcp.SetDeadline(deadline)
	stopCut := context.AfterFunc(ctx, func() { _ = tcp.SetDeadline(time.Unix(1, 0)) })
	conn, br, err := t.upgrade(ctx, tcp, host, target)
	if !stopCut() && err == nil {
		err = fmt.Errorf("raft transport group %d: stream to %s: %w", t.cfg.Group, target, ctx.Err())
	}
	if err == nil {
		err = tcp.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = tcp.Close()
		switch {
		case t.ctx.Err() != nil:
			return nil, errTransportClosed
		case !errors.Is(err, errNoRaw) && !errors.Is(err, ErrRefused) && time.Now().After(deadline):
			return nil, fmt.Errorf("raft transport group %d: %s did not accept a stream within %v: %w", t.cfg.Group, target, t.cfg.Timeouts.Open, err)
		}
		return nil, err
	}

	s := &stream{t: t, target: target, conn: conn, tcp: tcp}
	t.streamsMu.Lock()
	if t.closed {
		t.streamsMu.Unlock()
		_ = tcp.Close()
		return nil, errTransportClosed
	}
	t.streams[s] = struct{}{}
	t.streamsWG.Add(1)
	t.streamsMu.Unlock()
	go s.drain(br)
	t.heard(target)
	return s, nil
}

// upgrade runs the TLS handshake when the node has TLS, sends the raw
// stream's request and reads the answer. On success it returns the
// connection to write frames to and the reader the answer came through.
func (t *Transport) upgrade(ctx context.Context, tcp net.Conn, host, target string) (net.Conn, *bufio.Reader, error) {
	conn := tcp
	if t.rawTLS != nil {
		cfg := t.rawTLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host // as net/http does: the certificate must name the host dialled
		}
		tc := tls.Client(tcp, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			t.noteSendErr(target, err)
			return nil, nil, fmt.Errorf("raft transport group %d: stream to %s: %w", t.cfg.Group, target, err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
			// Never with nodetls's configurations; a peer that insists
			// on another protocol cannot be upgraded.
			return nil, nil, fmt.Errorf("%w: it negotiated %q in TLS", errNoRaw, p)
		}
		conn = tc
	}
	req := &http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Scheme: t.scheme, Host: target, Path: rawPath},
		Host:       target,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header: http.Header{
			TokenHeader:    {t.cfg.Token},
			GroupHeader:    {strconv.Itoa(t.cfg.Group)},
			"Connection":   {"Upgrade"},
			"Upgrade":      {rawProto},
			"User-Agent":   {"queen-raft"},
			"Content-Type": {"application/octet-stream"},
		},
	}
	var head bytes.Buffer
	if err := req.Write(&head); err != nil {
		return nil, nil, fmt.Errorf("raft transport group %d: stream to %s: %w", t.cfg.Group, target, err)
	}
	if _, err := conn.Write(head.Bytes()); err != nil {
		t.noteSendErr(target, err)
		return nil, nil, fmt.Errorf("raft transport group %d: stream to %s: %w", t.cfg.Group, target, err)
	}
	br := bufio.NewReaderSize(conn, 4<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.noteSendErr(target, err)
		return nil, nil, fmt.Errorf("raft transport group %d: stream to %s: %w", t.cfg.Group, target, err)
	}
	// resp.Body is left alone: closing it would read an error answer's
	// body to its end (a peer may never end it), and the connection is
	// closed on every path but the 101's, whose body is empty.
	switch code := resp.StatusCode; {
	case code == http.StatusSwitchingProtocols && strings.EqualFold(resp.Header.Get("Upgrade"), rawProto):
		return conn, br, nil
	case code == http.StatusUnauthorized:
		t.rejected.Add(1)
		t.warnRefused(target)
		return nil, nil, fmt.Errorf("raft transport group %d: peer %s %w (401)", t.cfg.Group, target, ErrRefused)
	case code == http.StatusNotFound, code == http.StatusMethodNotAllowed, code == http.StatusUpgradeRequired,
		code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported:
		// 404 is what an older build's mux answers for rawPath.
		return nil, nil, fmt.Errorf("%w: %s answered %s", errNoRaw, target, resp.Status)
	default:
		t.notePlainToTLS(target, code)
		return nil, nil, fmt.Errorf("raft transport group %d: peer %s answered %s", t.cfg.Group, target, resp.Status)
	}
}

// writeRaw writes one frame to a raw stream: in one write when it fits in
// writePiece, each piece within Timeouts.Write. Any failure aborts the
// stream (a frame cut short leaves the peer out of step).
func (s *stream) writeRaw(frame []byte) error {
	for len(frame) > 0 {
		piece := frame[:min(len(frame), writePiece)]
		err := s.conn.SetWriteDeadline(time.Now().Add(s.t.cfg.Timeouts.Write))
		if err == nil {
			var n int
			n, err = s.conn.Write(piece)
			frame = frame[n:]
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = errStalled
			}
			s.abort(err)
			return err
		}
	}
	return nil
}

// drain waits for the raw stream's connection to end: the receiver sends
// nothing after its 101, so a byte, an EOF or an error all mean the
// stream is over, and later sends fail at once, as a chunked stream's do
// when its answer ends.
func (s *stream) drain(br *bufio.Reader) {
	t := s.t
	defer t.streamsWG.Done()
	defer func() {
		t.streamsMu.Lock()
		delete(t.streams, s)
		t.streamsMu.Unlock()
	}()
	_, _ = br.ReadByte()
	s.abort(errStreamEnded)
}

// serveRaw is the receiving end of a raw stream, behind guard: it takes
// the connection over from net/http, answers 101 and hands each frame's
// batch to dragonboat until the sender ends the stream, with the bounds
// of a chunked one (Timeouts.Idle without a frame, Timeouts.Stall within
// one, MaxBodyBytes a frame).
func (t *Transport) serveRaw(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.ProtoMajor != 1:
		http.Error(w, "a raw raft stream needs HTTP/1.1", http.StatusHTTPVersionNotSupported)
		return
	case !strings.EqualFold(r.Header.Get("Upgrade"), rawProto) || !hasToken(r.Header.Values("Connection"), "upgrade"):
		w.Header().Set("Connection", "close")
		http.Error(w, "a raw raft stream needs Connection: Upgrade and Upgrade: "+rawProto, http.StatusUpgradeRequired)
		return
	case r.ContentLength != 0:
		// Frames follow the 101, never a body of the request.
		w.Header().Set("Connection", "close")
		http.Error(w, "a raw raft stream's request has no body", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			http.Error(w, "raw raft streams are not served here", http.StatusNotImplemented)
		}
		return
	}
	if !t.adoptRaw(conn) {
		_ = closeUnder(conn)
		return
	}
	defer t.dropRaw(conn)
	// A sender writes frames only after the 101, but whatever net/http
	// read past the request is the stream's all the same.
	var src io.Reader = conn
	if n := brw.Reader.Buffered(); n > 0 {
		held, _ := brw.Reader.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(held)), conn)
	}
	_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeouts.Write))
	if _, err := io.WriteString(conn, rawAnswer); err != nil {
		return
	}
	_ = conn.SetWriteDeadline(time.Time{})
	cr := &connReader{c: conn, r: src}
	t.readFrames(bufio.NewReaderSize(cr, rawReadBuf), &cr.timeout)
}

// adoptRaw records a hijacked connection so that Close ends it; false
// when the transport is already closed.
func (t *Transport) adoptRaw(c net.Conn) bool {
	t.streamsMu.Lock()
	defer t.streamsMu.Unlock()
	if t.closed {
		return false
	}
	t.rawIn[c] = struct{}{}
	t.rawInWG.Add(1)
	return true
}

// dropRaw closes a received raw stream's connection and forgets it.
func (t *Transport) dropRaw(c net.Conn) {
	t.streamsMu.Lock()
	delete(t.rawIn, c)
	t.streamsMu.Unlock()
	_ = closeUnder(c)
	t.rawInWG.Done()
}

// closeUnder closes c's TCP connection: a TLS connection's own Close
// first sends close_notify, which waits on a peer that may not read.
func closeUnder(c net.Conn) error {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn().Close()
	}
	return c.Close()
}

// connReader bounds each read of a raw stream by timeout from its start,
// as deadlineReader bounds a chunked one's.
type connReader struct {
	c       net.Conn
	r       io.Reader
	timeout time.Duration
}

func (cr *connReader) Read(p []byte) (int, error) {
	if err := cr.c.SetReadDeadline(time.Now().Add(cr.timeout)); err != nil {
		return 0, err
	}
	return cr.r.Read(p)
}

// hasToken reports whether a comma-separated header's values hold token,
// case-insensitively ("Connection: keep-alive, Upgrade").
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}
