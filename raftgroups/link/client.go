package link

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls"
)

// TokenHeader carries the link token (raftgroups/transport checks it).
const TokenHeader = "X-Queen-Link-Token"

// ErrCompacted is returned (wrapped in a *CompactedError) when the source
// no longer holds the entries asked for: the standby installs a snapshot.
var ErrCompacted = errors.New("link: the source compacted the entries asked for")

// ErrRefused is a source refusing the link token (401).
var ErrRefused = errors.New("link: the source refused QUEEN_LINK_TOKEN")

// CompactedError says from which index the source still holds entries.
type CompactedError struct{ First uint64 }

func (e *CompactedError) Error() string {
	return fmt.Sprintf("%v (it holds entries from %d)", ErrCompacted, e.First)
}

// Is makes errors.Is(err, ErrCompacted) true.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// Batch is one answer of the entries route.
type Batch struct {
	Entries []Entry
	// Commit is the last index the answering node serves (its applied
	// index); First the first it holds.
	Commit, First uint64
	// Leader is true when the group's leader answered: only then does
	// Commit bound what the source acknowledged (a follower's applied
	// index trails the leader's).
	Leader bool
}

// Client reads a source cluster's link. Any member of a group serves its
// committed entries, so a call tries the source's nodes in turn, starting
// with the one that answered last for that group (the group's leader once
// an answer names it), and a node it could not reach last for a while. Every wait is bounded:
// connecting (2 s), the TLS handshake (5 s), a read making no progress
// (30 s), and an entries call as a whole (its wait + 30 s).
type Client struct {
	addrs  []string // raft base addresses (group 0) of the source's nodes
	token  string
	scheme string
	http   *http.Client

	mu        sync.Mutex
	preferred map[int]int // group → index in addrs to ask first
	// downUntil holds the source nodes (base addresses) a call could not
	// reach: each is asked last until then, and never made the preferred
	// one, so a leader the standby is cut from costs one connect timeout
	// per downFor rather than one per read.
	downUntil map[string]time.Time
}

// downFor is how long a source node that could not be reached is asked
// last.
const downFor = 10 * time.Second

// maxAddrs bounds the source addresses a client learns from leaders'
// answers (a source whose nodes are replaced many times over).
const maxAddrs = 64

// Client timeouts.
const (
	dialTimeout = 2 * time.Second
	tlsTimeout  = 5 * time.Second
	readStall   = 30 * time.Second
	callSlack   = 30 * time.Second
)

// NewClient returns a client of the source whose nodes' raft base
// addresses are addrs, presenting token; with tls set every call is TLS
// (the source's raft listeners serve only TLS when it has node TLS on).
func NewClient(addrs []string, token string, tls *nodetls.Config) *Client {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	ht := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallConn{Conn: c}, nil
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: tlsTimeout,
		DisableCompression:  true,
	}
	c := &Client{addrs: append([]string(nil), addrs...), token: token, scheme: "http", http: &http.Client{Transport: ht},
		preferred: map[int]int{}, downUntil: map[string]time.Time{}}
	if tls != nil {
		c.scheme = "https"
		ht.TLSClientConfig = tls.Client()
	}
	return c
}

// Close drops idle connections; the client owns no goroutine otherwise.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// stallConn fails a read that makes no progress for readStall: a source
// that stops sending mid-body (a snapshot) ends the call.
type stallConn struct{ net.Conn }

func (s *stallConn) Read(p []byte) (int, error) {
	_ = s.Conn.SetReadDeadline(time.Now().Add(readStall))
	return s.Conn.Read(p)
}

// groupAddr is the address of group n on the node whose base is base.
func groupAddr(base string, n int) (string, error) {
	host, port, err := net.SplitHostPort(base)
	if err != nil {
		return "", fmt.Errorf("link: source address %q: %w", base, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p+n > 65535 {
		return "", fmt.Errorf("link: source address %q: bad port", base)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n)), nil
}

// do sends GET path?q to group's listener on each source node in turn,
// starting with the preferred one, and returns the first answer that is
// not a transport error or a 5xx. The caller closes the body.
func (c *Client) do(ctx context.Context, group int, path string, q url.Values) (*http.Response, error) {
	c.mu.Lock()
	start := c.preferred[group]
	addrs := c.addrs[:len(c.addrs):len(c.addrs)]
	order := make([]int, 0, len(addrs))
	var down []int
	now := time.Now()
	for i := range addrs {
		at := (start + i) % len(addrs)
		if now.Before(c.downUntil[addrs[at]]) {
			down = append(down, at)
		} else {
			order = append(order, at)
		}
	}
	order = append(order, down...)
	c.mu.Unlock()
	if len(addrs) == 0 {
		return nil, errors.New("link: no source addresses")
	}
	var errs []error
	for _, at := range order {
		addr, err := groupAddr(addrs[at], group)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		u := c.scheme + "://" + addr + path
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, fmt.Errorf("link: %w", err)
		}
		req.Header.Set(TokenHeader, c.token)
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("link: group %d %s: %w", group, path, ctx.Err())
			}
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			c.mu.Lock()
			c.downUntil[addrs[at]] = time.Now().Add(downFor)
			c.mu.Unlock()
			continue
		}
		if resp.StatusCode >= 500 {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			errs = append(errs, fmt.Errorf("%s: %s: %s", addr, resp.Status, msg))
			continue
		}
		if resp.StatusCode == http.StatusUnauthorized {
			resp.Body.Close()
			return nil, fmt.Errorf("link: group %d at %s: %w", group, addr, ErrRefused)
		}
		c.mu.Lock()
		delete(c.downUntil, addrs[at])
		c.preferred[group] = at
		c.followLeader(group, resp.Header)
		c.mu.Unlock()
		return resp, nil
	}
	return nil, fmt.Errorf("link: group %d %s: no source node answered: %w", group, path, errors.Join(errs...))
}

// followLeader makes the group's leader, when the answer names another
// node, the one asked first next time, learning its address if it is new.
// The caller holds mu.
func (c *Client) followLeader(group int, h http.Header) {
	c.learnMembers(h.Get(HeaderMembers))
	if isLeader(h) || h.Get(HeaderLeader) == "" || h.Get(HeaderLeader) == "0" {
		return
	}
	base := h.Get(HeaderLeaderAddr)
	if _, err := groupAddr(base, group); err != nil {
		return
	}
	if i, ok := c.learn(base); ok && !time.Now().Before(c.downUntil[base]) {
		c.preferred[group] = i
	}
}

// learnMembers adds the source nodes an answer lists (a source that added
// nodes), so the client still reaches the source once every node it was
// given is gone. The caller holds mu.
func (c *Client) learnMembers(list string) {
	for _, base := range strings.Split(list, ",") {
		if base = strings.TrimSpace(base); base != "" {
			c.learn(base)
		}
	}
}

// learn is base's index in addrs, adding it if it is new and valid (false
// when it is not, or addrs is full). The caller holds mu.
func (c *Client) learn(base string) (int, bool) {
	for i, a := range c.addrs {
		if a == base {
			return i, true
		}
	}
	if _, err := groupAddr(base, 0); err != nil || len(c.addrs) >= maxAddrs {
		return 0, false
	}
	c.addrs = append(c.addrs, base)
	return len(c.addrs) - 1, true
}

// isLeader reports whether the answer came from the group's leader.
func isLeader(h http.Header) bool {
	node, leader := h.Get(HeaderNode), h.Get(HeaderLeader)
	return node != "" && node != "0" && node == leader
}

// errorOf turns a non-200 answer into an error, reading its JSON body.
func errorOf(group int, path string, resp *http.Response) error {
	var body struct {
		Error      string `json:"error"`
		Code       string `json:"code"`
		FirstIndex uint64 `json:"firstIndex"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	if resp.StatusCode == http.StatusGone && body.Code == "compacted" {
		return &CompactedError{First: body.FirstIndex}
	}
	return fmt.Errorf("link: group %d %s: %s: %s", group, path, resp.Status, body.Error)
}

// Info asks for group's state on a source node.
func (c *Client) Info(ctx context.Context, group int) (Info, error) {
	ctx, cancel := context.WithTimeout(ctx, callSlack)
	defer cancel()
	resp, err := c.do(ctx, group, "/link/v1/info", nil)
	if err != nil {
		return Info{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Info{}, errorOf(group, "info", resp)
	}
	var info Info
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return Info{}, fmt.Errorf("link: group %d info: %w", group, err)
	}
	c.mu.Lock()
	for _, base := range info.Members {
		c.learn(base)
	}
	c.mu.Unlock()
	return info, nil
}

// Entries reads group's committed entries from index from on, at most
// maxBytes (at least one entry when there is one), waiting up to wait
// (capped at MaxWait) when there is none yet. An empty batch means none
// came in the wait. A source that compacted them answers a
// *CompactedError (errors.Is ErrCompacted), whose First is also in the
// batch.
func (c *Client) Entries(ctx context.Context, group int, from uint64, maxBytes int, wait time.Duration) (Batch, error) {
	wait = min(max(wait, 0), MaxWait)
	ctx, cancel := context.WithTimeout(ctx, wait+callSlack)
	defer cancel()
	q := url.Values{}
	q.Set("from", strconv.FormatUint(from, 10))
	q.Set("maxBytes", strconv.Itoa(max(maxBytes, 1)))
	q.Set("waitMs", strconv.FormatInt(wait.Milliseconds(), 10))
	resp, err := c.do(ctx, group, "/link/v1/entries", q)
	if err != nil {
		return Batch{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := errorOf(group, "entries", resp)
		var ce *CompactedError
		if errors.As(err, &ce) {
			return Batch{First: ce.First}, err
		}
		return Batch{}, err
	}
	var b Batch
	b.Commit, _ = strconv.ParseUint(resp.Header.Get(HeaderCommit), 10, 64)
	b.First, _ = strconv.ParseUint(resp.Header.Get(HeaderFirst), 10, 64)
	b.Leader = isLeader(resp.Header)
	// One entry may exceed maxBytes; none exceeds maxPayload.
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(min(maxBytes, MaxBytesCap))+maxPayload+64))
	if err != nil {
		return Batch{}, fmt.Errorf("link: group %d entries: %w", group, err)
	}
	if b.Entries, err = parseFrames(body); err != nil {
		return Batch{}, fmt.Errorf("link: group %d entries: %w", group, err)
	}
	if len(b.Entries) > 0 && b.Entries[0].Index != from {
		return Batch{}, fmt.Errorf("link: group %d entries: asked from %d, got from %d", group, from, b.Entries[0].Index)
	}
	return b, nil
}

// Snapshot fetches a consistent copy of group's store: the applied index
// it was taken at and its stream (storage's snapshot format), which the
// caller reads to its end and closes. The stream's reads are bounded by a
// stall timeout, not a total one: a large store takes as long as it takes.
func (c *Client) Snapshot(ctx context.Context, group int) (uint64, io.ReadCloser, error) {
	resp, err := c.do(ctx, group, "/link/v1/snapshot", nil)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return 0, nil, errorOf(group, "snapshot", resp)
	}
	index, err := strconv.ParseUint(resp.Header.Get(HeaderIndex), 10, 64)
	if err != nil {
		resp.Body.Close()
		return 0, nil, fmt.Errorf("link: group %d snapshot: no index header", group)
	}
	return index, &verifiedBody{rc: resp.Body, resp: resp, group: group}, nil
}

// ErrSnapshotCut is a snapshot stream that ended before its end.
var ErrSnapshotCut = errors.New("link: the source's snapshot stream was cut short or corrupted")

// verifiedBody is a snapshot stream that says io.EOF only once the whole
// stream arrived: the source's trailers name its length and CRC-32C.
type verifiedBody struct {
	rc    io.ReadCloser
	resp  *http.Response
	group int
	n     uint64
	crc   uint32
}

func (v *verifiedBody) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.n += uint64(n)
	v.crc = crc32.Update(v.crc, castagnoli, p[:n])
	if err == io.EOF {
		wantN, nerr := strconv.ParseUint(v.resp.Trailer.Get(TrailerBytes), 10, 64)
		wantCRC, cerr := strconv.ParseUint(v.resp.Trailer.Get(TrailerCRC), 10, 32)
		if nerr != nil || cerr != nil || wantN != v.n || uint32(wantCRC) != v.crc {
			return n, fmt.Errorf("%w (group %d: %d bytes read)", ErrSnapshotCut, v.group, v.n)
		}
	}
	return n, err
}

func (v *verifiedBody) Close() error { return v.rc.Close() }
