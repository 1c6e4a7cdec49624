package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// A stream is one POST to streamPath whose chunked body is a sequence of
// frames: a 4-byte big-endian length, then a marshalled pb.MessageBatch.
// The receiver checks the headers, answers 200 at once and then reads
// frames until the body ends; the sender learns the stream is open (or
// that its token was refused) from that answer before it sends a frame.
// Dragonboat uses a connection from one goroutine and keeps it until a
// send fails, so frames keep its order and a failed stream is replaced by
// a new one through GetConnection.

var (
	errStreamEnded     = errors.New("raft transport: stream ended by the peer")
	errTransportClosed = errors.New("raft transport: closed")
	errStalled         = errors.New("raft transport: peer stopped reading the stream")
)

const (
	// keepFrameBuf is the largest frame buffer a stream keeps between
	// sends; a larger one (a batch of big entries) is dropped after use.
	keepFrameBuf = 4 << 20
	// writePiece is how much of a frame is handed to the connection at a
	// time; each piece must go within Timeouts.Write, so a large frame on
	// a slow link is not mistaken for a stalled peer, while a peer that
	// stops reading (paused, partitioned) fails the send.
	writePiece = 256 << 10
	// heardEvery is how often a received stream records its sender's
	// contact (LastContact) at most.
	heardEvery = 50 * time.Millisecond
)

// stream is the sending end; it implements raftio.IConnection. It is
// either chunked (pw, pr, cancel and stall set: frames go through the pipe
// into a POST's body) or raw (conn set: frames go straight onto the
// upgraded connection, raw.go).
type stream struct {
	t      *Transport
	target string
	pw     *io.PipeWriter
	pr     *io.PipeReader
	cancel context.CancelFunc
	stall  *time.Timer
	// conn is a raw stream's connection (TCP or TLS) and tcp the TCP
	// connection under it, which abort closes: closing a TLS connection
	// would first try to send close_notify to a peer that may not read.
	conn net.Conn
	tcp  net.Conn
	buf  []byte
	once sync.Once
	why  atomic.Pointer[error] // what aborted the stream
}

// openStream starts the request and waits for the peer's answer to its
// headers.
func (t *Transport) openStream(ctx context.Context, target string) (*stream, error) {
	reqCtx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, t.url(target, streamPath), pr)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("raft transport: request to %s: %w", target, err)
	}
	req.ContentLength = -1
	req.Header.Set(TokenHeader, t.cfg.Token)
	req.Header.Set(GroupHeader, strconv.Itoa(t.cfg.Group))
	req.Header.Set("Content-Type", "application/octet-stream")

	s := &stream{t: t, target: target, pw: pw, pr: pr, cancel: cancel}
	t.streamsMu.Lock()
	if t.closed {
		t.streamsMu.Unlock()
		cancel()
		return nil, errTransportClosed
	}
	t.streams[s] = struct{}{}
	t.streamsWG.Add(1)
	t.streamsMu.Unlock()

	opened := make(chan error, 1)
	go s.run(req, opened)
	timer := time.NewTimer(t.cfg.Timeouts.Open)
	defer timer.Stop()
	select {
	case err = <-opened:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("raft transport group %d: %s did not accept a stream within %v", t.cfg.Group, target, t.cfg.Timeouts.Open)
	}
	if err != nil {
		s.abort(err)
		return nil, err
	}
	s.stall = time.AfterFunc(time.Hour, func() { s.abort(errStalled) })
	s.stall.Stop()
	return s, nil
}

// run makes the request and holds it until the peer ends its answer or the
// stream is aborted; the first outcome goes to opened.
func (s *stream) run(req *http.Request, opened chan<- error) {
	t := s.t
	defer t.streamsWG.Done()
	defer func() {
		t.streamsMu.Lock()
		delete(t.streams, s)
		t.streamsMu.Unlock()
	}()
	resp, err := t.client.Do(req)
	if err != nil {
		t.noteSendErr(s.target, err)
		err = fmt.Errorf("raft transport group %d: stream to %s: %w", t.cfg.Group, s.target, err)
		opened <- err
		s.abort(err)
		return
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		t.rejected.Add(1)
		t.warnRefused(s.target)
		err = fmt.Errorf("raft transport group %d: peer %s %w (401)", t.cfg.Group, s.target, ErrRefused)
	case resp.StatusCode != http.StatusOK:
		t.notePlainToTLS(s.target, resp.StatusCode)
		err = fmt.Errorf("raft transport group %d: peer %s answered %s", t.cfg.Group, s.target, resp.Status)
	}
	if err != nil {
		opened <- err
		s.abort(err)
		return
	}
	t.heard(s.target)
	opened <- nil
	// The answer's body ends when the peer stops reading the stream.
	_, _ = io.Copy(io.Discard, resp.Body)
	s.abort(errStreamEnded)
}

// abort ends the stream at once: pending and later sends fail with err.
func (s *stream) abort(err error) {
	s.once.Do(func() {
		s.why.Store(&err)
		if s.conn != nil {
			_ = s.tcp.Close()
			return
		}
		s.pr.CloseWithError(err)
		s.pw.CloseWithError(err)
		s.cancel()
	})
}

// Close ends the stream; dragonboat calls it when it stops using the
// connection.
func (s *stream) Close() {
	if s.stall != nil {
		s.stall.Stop()
	}
	s.abort(errStreamEnded)
}

// SendMessageBatch writes one frame. It returns once the frame is handed to
// the connection, not when the peer has read it: raft needs order, not an
// answer per batch, and its own messages say what the peer did.
func (s *stream) SendMessageBatch(b pb.MessageBatch) error {
	if s.t.cfg.Drop != nil {
		if err := s.t.cfg.Drop(s.target); err != nil {
			s.abort(err)
			return err
		}
	}
	need := 4 + b.SizeUpperLimit()
	if int64(need) > s.t.cfg.MaxBodyBytes+4 {
		if n := b.Size(); int64(n) > s.t.cfg.MaxBodyBytes {
			// The peer would drop the stream at this frame, and raft
			// would send it again and again. The node's limits are set so
			// this never happens (raftgroups' frameLimit); should it, the
			// batch is dropped here, as a lost message, and said loudly,
			// and the stream stays up for the peer's other messages.
			s.t.oversized.Add(1)
			s.t.warnOversized(s.target, n)
			return nil
		}
	}
	if cap(s.buf) < need {
		s.buf = make([]byte, need)
	}
	n, err := b.MarshalTo(s.buf[4:need])
	if err != nil {
		return fmt.Errorf("raft transport: marshal batch: %w", err)
	}
	binary.BigEndian.PutUint32(s.buf, uint32(n))
	if s.conn != nil {
		err = s.writeRaw(s.buf[:4+n])
	}
	for frame := s.buf[:4+n]; s.conn == nil && len(frame) > 0 && err == nil; {
		piece := frame[:min(len(frame), writePiece)]
		frame = frame[len(piece):]
		s.stall.Reset(s.t.cfg.Timeouts.Write)
		_, err = s.pw.Write(piece)
		s.stall.Stop()
	}
	if cap(s.buf) > keepFrameBuf {
		s.buf = nil
	}
	if err != nil {
		if why := s.why.Load(); why != nil {
			err = *why // the pipe only says it was closed
		}
		return fmt.Errorf("raft transport group %d: send to %s: %w", s.t.cfg.Group, s.target, err)
	}
	return nil
}

// serveStream is the receiving end: it accepts the stream, then hands each
// frame's batch to dragonboat until the body ends. A stream with no frame
// for Timeouts.Idle, or whose frame stops arriving for Timeouts.Stall, is
// dropped: its sender is gone or stuck and will open a new stream.
func (t *Transport) serveStream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	// The connection closes with the stream: a stream that ended early (a
	// timeout, a bad frame) leaves the body unread, and net/http would
	// otherwise keep the connection waiting for a next request.
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	body := &deadlineReader{r: r.Body, rc: rc}
	t.readFrames(bufio.NewReaderSize(body, 64<<10), &body.timeout)
}

// readFrames hands each frame's batch read from br to dragonboat until the
// stream ends, the sender's or a bad frame's doing. Before each read it
// sets *timeout, the bound of the reader under br: Timeouts.Idle while
// waiting for a frame, Timeouts.Stall while one is arriving.
func (t *Transport) readFrames(br *bufio.Reader, timeout *time.Duration) {
	var head [4]byte
	var frame []byte
	var heardFrom string
	var heardAt time.Time
	for {
		*timeout = t.cfg.Timeouts.Idle
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return // io.EOF: the sender ended the stream
		}
		*timeout = t.cfg.Timeouts.Stall
		n := int64(binary.BigEndian.Uint32(head[:]))
		if n > t.cfg.MaxBodyBytes {
			t.cfg.Logger.Warn("raft: dropping a stream whose batch is over the limit", "group", t.cfg.Group, "bytes", n, "limit", t.cfg.MaxBodyBytes)
			return
		}
		// The buffer is reused: Unmarshal copies every byte it keeps
		// (raftpb's entries, chunks and strings never alias their input).
		if int64(cap(frame)) < n {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		var b pb.MessageBatch
		if err := b.Unmarshal(frame); err != nil {
			t.cfg.Logger.Warn("raft: dropping a stream with a malformed batch", "group", t.cfg.Group, "err", err)
			return
		}
		// Contact is read at a scale of seconds (LastContact); storing
		// it for every frame cost 6% of a raw stream's CPU at small frames.
		if now := time.Now(); b.SourceAddress != heardFrom || now.Sub(heardAt) >= heardEvery {
			t.heard(b.SourceAddress)
			heardFrom, heardAt = b.SourceAddress, now
		}
		t.mh(b)
		if cap(frame) > keepFrameBuf {
			frame = nil
		}
	}
}
