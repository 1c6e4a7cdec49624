package link

import (
	"bufio"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Response headers of the entries and snapshot routes.
const (
	HeaderCommit = "X-Queen-Link-Commit"
	HeaderFirst  = "X-Queen-Link-First"
	HeaderIndex  = "X-Queen-Link-Index"
	// HeaderNode is the answering node's id; HeaderLeader the group's
	// leader as it knows it (0: none) and HeaderLeaderAddr the leader's
	// raft base address. A standby reads from the leader: the leader is
	// the node whose applied index bounds what the source acknowledged
	// (a follower trails it), so only a leader's answer makes the lag an
	// upper bound.
	HeaderNode       = "X-Queen-Link-Node"
	HeaderLeader     = "X-Queen-Link-Leader"
	HeaderLeaderAddr = "X-Queen-Link-Leader-Addr"
	// HeaderMembers lists the raft base addresses of the group's voters,
	// comma-separated: a standby learns the nodes a source adds, so it
	// keeps following when every node it was started with is replaced.
	HeaderMembers = "X-Queen-Link-Members"
	// Trailers of the snapshot route: the stream's length and CRC-32C,
	// sent after it, so a standby tells a whole stream from one cut short
	// (a chunked body that ends cleanly but early looks whole otherwise).
	TrailerBytes = "X-Queen-Link-Bytes"
	TrailerCRC   = "X-Queen-Link-Crc"
)

// Limits of the entries route.
const (
	// MaxWait caps a long poll.
	MaxWait = 5 * time.Second
	// DefaultMaxBytes is a batch's size when the request names none;
	// MaxBytesCap is the most a request may ask (one entry always goes,
	// whatever its size).
	DefaultMaxBytes = 1 << 20
	MaxBytesCap     = 16 << 20
	// pollEvery is how often a long poll looks at the applied index;
	// notifiedPollEvery when the source also wakes it (Notifier).
	pollEvery         = 2 * time.Millisecond
	notifiedPollEvery = 100 * time.Millisecond
	// writeStall bounds a write to the standby that makes no progress.
	writeStall = 15 * time.Second
	// maxReads and maxSnapshots bound the entries reads (each holds up to
	// MaxBytesCap and one entry in memory) and the snapshot copies (each
	// pins a view of the store, which keeps its files from being
	// compacted away) a group serves at once; beyond them a request is
	// answered 503 busy and the client tries another source node. A
	// standby reads each group from one node at a time.
	maxReads     = 8
	maxSnapshots = 2
)

// Info describes a source group, as GET /link/v1/info answers it.
type Info struct {
	NodeID uint64 `json:"nodeId"`
	Groups int    `json:"groups"`
	Group  int    `json:"group"`
	// FirstIndex is the first entry this node still holds; CommitIndex
	// the last it serves (its applied index: every applied entry is
	// committed).
	FirstIndex  uint64 `json:"firstIndex"`
	CommitIndex uint64 `json:"commitIndex"`
	Format      uint32 `json:"format"`
	// Members maps each voter of the group to its raft base address (the
	// group 0 listener; group N is on port + N).
	Members map[string]string `json:"members"`
}

// Snapshot is a consistent copy of a group's store at applied index Index.
type Snapshot interface {
	Index() uint64
	// WriteTo streams the copy (storage's snapshot stream) until done or
	// stop closes.
	WriteTo(w io.Writer, stop <-chan struct{}) error
	// Close releases what the copy holds; it may follow WriteTo or not.
	Close()
}

// Source is one raft group of the node serving the link; raftgroups
// implements it (link_server.go).
type Source interface {
	// Ready is false until the group's raft node is up.
	Ready() bool
	Info() (Info, error)
	// Range is the raft log's range this node holds, [first, last].
	Range() (first, last uint64, err error)
	// Entries reads raft log entries [low, high), at most maxSize bytes
	// but at least one.
	Entries(low, high, maxSize uint64) ([]pb.Entry, error)
	// Applied is the group's applied index here.
	Applied() uint64
	Snapshot() (Snapshot, error)
}

// Leadership is a Source that knows the group's leader.
type Leadership interface {
	// Leader is this node's id, the group's leader id (0: none known),
	// the leader's raft base address ("" when unknown) and every voter's.
	Leader() (self, leader uint64, leaderAddr string, members []string)
}

// Notifier is a Source that says when it applies entries, so long polls
// wake at once instead of looking every pollEvery.
type Notifier interface {
	// AppliedChanged is closed once entries are applied after the call.
	AppliedChanged() <-chan struct{}
}

// Server serves the link routes of one group.
type Server struct {
	src   Source
	mux   *http.ServeMux
	reads chan struct{} // a slot per entries read in progress
	snaps chan struct{} // a slot per snapshot copy in progress
}

// NewServer returns the handler of the link routes of src's group. The
// transport mounts it behind the link token.
func NewServer(src Source) *Server {
	s := &Server{src: src, mux: http.NewServeMux(), reads: make(chan struct{}, maxReads), snaps: make(chan struct{}, maxSnapshots)}
	s.mux.HandleFunc("/link/v1/info", s.info)
	s.mux.HandleFunc("/link/v1/entries", s.entries)
	s.mux.HandleFunc("/link/v1/snapshot", s.snapshot)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.src.Ready() {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the group is starting", nil)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func writeError(w http.ResponseWriter, status int, code, msg string, extra map[string]any) {
	body := map[string]any{"error": msg, "code": code}
	for k, v := range extra {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	info, err := s.src.Info()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), nil)
		return
	}
	s.setLeader(w)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// setLeader tells the standby who leads the group (nothing when the
// source does not know: the standby then treats the answer as a
// follower's).
func (s *Server) setLeader(w http.ResponseWriter) {
	l, ok := s.src.(Leadership)
	if !ok {
		return
	}
	self, leader, addr, members := l.Leader()
	w.Header().Set(HeaderNode, strconv.FormatUint(self, 10))
	w.Header().Set(HeaderLeader, strconv.FormatUint(leader, 10))
	if addr != "" {
		w.Header().Set(HeaderLeaderAddr, addr)
	}
	if len(members) > 0 {
		w.Header().Set(HeaderMembers, strings.Join(members, ","))
	}
}

// query reads a non-negative integer parameter.
func query(r *http.Request, name string, def uint64) (uint64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

func (s *Server) entries(w http.ResponseWriter, r *http.Request) {
	from, ok1 := query(r, "from", 0)
	maxBytes, ok2 := query(r, "maxBytes", DefaultMaxBytes)
	waitMs, ok3 := query(r, "waitMs", 0)
	if !ok1 || !ok2 || !ok3 || from == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "from (>= 1), maxBytes and waitMs must be whole numbers", nil)
		return
	}
	maxBytes = min(max(maxBytes, 1), MaxBytesCap)
	wait := time.Duration(min(waitMs, uint64(MaxWait/time.Millisecond))) * time.Millisecond
	// A long poll: nothing past from-1 is applied yet. It ends early when
	// the standby goes away. A source that says when it applies wakes it
	// at once (taken before the applied index is read, so no wake is
	// missed); otherwise, and as a safety net, the index is looked at
	// every pollEvery.
	n, notifies := s.src.(Notifier)
	var changed <-chan struct{}
	if notifies {
		changed = n.AppliedChanged()
	}
	applied := s.src.Applied()
	if applied < from && wait > 0 {
		every := pollEvery
		if notifies {
			every = notifiedPollEvery
		}
		deadline := time.NewTimer(wait)
		tick := time.NewTicker(every)
	poll:
		for applied < from {
			select {
			case <-r.Context().Done():
				break poll
			case <-deadline.C:
				break poll
			case <-changed:
				changed = n.AppliedChanged()
				applied = s.src.Applied()
			case <-tick.C:
				applied = s.src.Applied()
			}
		}
		deadline.Stop()
		tick.Stop()
	}
	// The slot is taken after the wait: a long poll holds no memory.
	select {
	case s.reads <- struct{}{}:
		defer func() { <-s.reads }()
	default:
		writeError(w, http.StatusServiceUnavailable, "busy", "too many link reads of this group at once", nil)
		return
	}
	first, _, err := s.src.Range()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), nil)
		return
	}
	if from < first {
		writeError(w, http.StatusGone, "compacted", "the entries from this index were compacted; install a snapshot",
			map[string]any{"firstIndex": first})
		return
	}
	var ents []pb.Entry
	if from <= applied {
		ents, err = s.read(from, applied, maxBytes)
		if err != nil {
			// Compacted between Range and Entries, or the log is closing.
			if f, _, rerr := s.src.Range(); rerr == nil && from < f {
				writeError(w, http.StatusGone, "compacted", "the entries from this index were compacted; install a snapshot",
					map[string]any{"firstIndex": f})
				return
			}
			writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), nil)
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(HeaderCommit, strconv.FormatUint(applied, 10))
	w.Header().Set(HeaderFirst, strconv.FormatUint(first, 10))
	s.setLeader(w)
	sw := &stallWriter{w: w, rc: http.NewResponseController(w)}
	bw := bufio.NewWriterSize(sw, 64<<10)
	var frame []byte
	for i, e := range ents {
		if e.Index != from+uint64(i) {
			break // never a gap: the standby applies a contiguous run
		}
		le, err := toEntry(e)
		if err != nil {
			if i == 0 {
				writeError(w, http.StatusInternalServerError, "internal", err.Error(), nil)
				return
			}
			break
		}
		frame = appendFrame(frame[:0], le)
		if _, err := bw.Write(frame); err != nil {
			return
		}
	}
	_ = bw.Flush()
}

// readStep is how many entries one read of the raft log asks for, and
// maxEntries how many one answer carries. Dragonboat's log reader holds
// its lock, which the group's raft step path also takes for every append,
// across the whole read, and its log (tan) opens and reads the file once
// per stored update; small steps keep each hold to about a millisecond
// even for the smallest entries, so a standby never stalls its source's
// raft.
const (
	readStep   = 32
	maxEntries = 4096
)

// read reads entries from..last, at most maxBytes (at least one) and
// maxEntries, in steps of readStep.
func (s *Server) read(from, last, maxBytes uint64) ([]pb.Entry, error) {
	var out []pb.Entry
	var size uint64
	for next := from; next <= last && size < maxBytes && len(out) < maxEntries; {
		high := min(last+1, next+readStep)
		ents, err := s.src.Entries(next, high, maxBytes-size)
		if err != nil {
			if len(out) > 0 {
				return out, nil // what was read goes; the next call meets the error
			}
			return nil, err
		}
		if len(ents) == 0 {
			break
		}
		for i := range ents {
			if len(out) > 0 && size+uint64(len(ents[i].Cmd)) > maxBytes {
				return out, nil
			}
			size += uint64(len(ents[i].Cmd))
			out = append(out, ents[i])
		}
		next = out[len(out)-1].Index + 1
		if next != high {
			break // the budget ended this step
		}
	}
	return out, nil
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	select {
	case s.snaps <- struct{}{}:
		defer func() { <-s.snaps }()
	default:
		writeError(w, http.StatusServiceUnavailable, "busy", "too many snapshot copies of this group at once", nil)
		return
	}
	snap, err := s.src.Snapshot()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), nil)
		return
	}
	defer snap.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(HeaderIndex, strconv.FormatUint(snap.Index(), 10))
	w.Header().Set("Trailer", TrailerBytes+", "+TrailerCRC)
	w.WriteHeader(http.StatusOK)
	cw := &crcWriter{w: &stallWriter{w: w, rc: http.NewResponseController(w)}}
	if err := snap.WriteTo(cw, r.Context().Done()); err != nil {
		// Cut the connection: the standby sees the stream end without its
		// last chunk and trailers, never one that ends cleanly where it
		// stopped. net/http's own abort when the connection cannot be
		// taken over.
		if conn, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
			_ = conn.Close()
			return
		}
		panic(http.ErrAbortHandler)
	}
	w.Header().Set(TrailerBytes, strconv.FormatUint(cw.n, 10))
	w.Header().Set(TrailerCRC, strconv.FormatUint(uint64(cw.crc), 10))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcWriter counts and checksums what passes.
type crcWriter struct {
	w   io.Writer
	n   uint64
	crc uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}

// stallWriter bounds each write to the standby: a standby that stops
// reading fails the request after writeStall instead of holding the
// handler (and on the snapshot route, the store's pinned copy) forever.
type stallWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if err := s.rc.SetWriteDeadline(time.Now().Add(writeStall)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	return s.w.Write(p)
}
