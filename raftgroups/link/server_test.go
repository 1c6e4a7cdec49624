package link

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/client"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/crypto/nodetls"
	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
	"github.com/queen-mq/queen/wire"
)

// fakeSource is a group whose log the test writes.
type fakeSource struct {
	mu       sync.Mutex
	log      []pb.Entry // log[i].Index == first+i
	first    uint64
	applied  atomic.Uint64
	failSnap atomic.Bool
}

func (f *fakeSource) Ready() bool { return true }
func (f *fakeSource) Info() (Info, error) {
	return Info{NodeID: 1, Groups: 1, FirstIndex: f.first, CommitIndex: f.applied.Load(), Format: wire.NewestFormat}, nil
}
func (f *fakeSource) Range() (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first, f.first + uint64(len(f.log)) - 1, nil
}
func (f *fakeSource) Entries(low, high, maxSize uint64) ([]pb.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []pb.Entry
	size := uint64(0)
	for i := low; i < high; i++ {
		e := f.log[i-f.first]
		if len(out) > 0 && size+uint64(len(e.Cmd)) > maxSize {
			break
		}
		size += uint64(len(e.Cmd))
		out = append(out, e)
	}
	return out, nil
}
func (f *fakeSource) Applied() uint64 { return f.applied.Load() }
func (f *fakeSource) Snapshot() (Snapshot, error) {
	return fakeSnap{index: f.applied.Load(), fail: f.failSnap.Load()}, nil
}

type fakeSnap struct {
	index uint64
	fail  bool
}

func (s fakeSnap) Index() uint64 { return s.index }
func (s fakeSnap) WriteTo(w io.Writer, stop <-chan struct{}) error {
	_, err := io.WriteString(w, "QSNAP2\nthe store")
	if s.fail {
		return errors.New("the store went away")
	}
	return err
}
func (s fakeSnap) Close() {}

// appendCmd appends an entry carrying one KV command, as dragonboat
// stores a proposal: an encoded entry with its one-byte header.
func (f *fakeSource) appendCmd(nowMs int64, key string) {
	kc := wire.KVCmd{Ops: []wire.KVOp{{Op: wire.KVPut, NS: "n", Key: []byte(key), Value: []byte(`1`)}}}
	payload := wire.AppendEntry(nil, nowMs, []wire.Command{{Kind: wire.KindKV, Body: kc.Encode(nil)}})
	f.mu.Lock()
	idx := f.first + uint64(len(f.log))
	f.log = append(f.log, pb.Entry{Index: idx, Type: pb.EncodedEntry, ClientID: 7, SeriesID: client.NoOPSeriesID, Cmd: append([]byte{0}, payload...)})
	f.mu.Unlock()
	f.applied.Store(idx)
}

func (f *fakeSource) appendMembership() {
	f.mu.Lock()
	idx := f.first + uint64(len(f.log))
	f.log = append(f.log, pb.Entry{Index: idx, Type: pb.ConfigChangeEntry, Cmd: []byte("cc")})
	f.mu.Unlock()
	f.applied.Store(idx)
}

func tlsConfig(t *testing.T, ca *nodetlstest.CA, name string) *nodetls.Config {
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

func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Through a TLS listener, past a source node that is down: entries come
// back decoded with their stamps and skips, a long poll wakes on a new
// entry, a compacted index says ErrCompacted with the first index held,
// and a snapshot carries its index.
func TestClientAgainstServer(t *testing.T) {
	ca, err := nodetlstest.NewCA(t.TempDir(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{first: 5}
	src.appendMembership()
	for i := 0; i < 10; i++ {
		src.appendCmd(1_700_000_000_000+int64(i), "k"+strings.Repeat("x", i))
	}
	ts := httptest.NewUnstartedServer(NewServer(src))
	ts.TLS = tlsConfig(t, ca, "source").Server()
	ts.StartTLS()
	t.Cleanup(ts.Close)
	live := strings.TrimPrefix(ts.URL, "https://")
	c := NewClient([]string{deadAddr(t), live}, "tok", tlsConfig(t, ca, "standby"))
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b, err := c.Entries(ctx, 0, 5, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Entries) != 11 || b.Commit != 15 || b.First != 5 || !b.Entries[0].Skip || b.Entries[0].Payload != nil {
		t.Fatalf("batch %+v", b)
	}
	for i, e := range b.Entries[1:] {
		pe, err := wire.ParseEntry(e.Payload)
		if e.Index != uint64(6+i) || e.Skip || err != nil || e.StampMs != uint64(1_700_000_000_000+i) || pe.NowMs != int64(e.StampMs) {
			t.Fatalf("entry %d: %+v %v", i, e, err)
		}
	}
	if c.preferred[0] != 1 {
		t.Fatal("the node that answered is not remembered")
	}
	// maxBytes bounds a batch, one entry always goes.
	if b, err := c.Entries(ctx, 0, 6, 1, 0); err != nil || len(b.Entries) != 1 {
		t.Fatalf("one byte: %d entries, %v", len(b.Entries), err)
	}
	// A long poll wakes on the next entry.
	go func() {
		time.Sleep(200 * time.Millisecond)
		src.appendCmd(1_700_000_000_100, "late")
	}()
	start := time.Now()
	b, err = c.Entries(ctx, 0, 16, 1<<20, 5*time.Second)
	if err != nil || len(b.Entries) != 1 || b.Entries[0].Index != 16 {
		t.Fatalf("long poll: %+v %v", b, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("long poll took %v", d)
	}
	// Nothing new: an empty batch after the wait.
	if b, err := c.Entries(ctx, 0, 17, 1<<20, 50*time.Millisecond); err != nil || len(b.Entries) != 0 || b.Commit != 16 {
		t.Fatalf("empty wait: %+v %v", b, err)
	}
	_, err = c.Entries(ctx, 0, 4, 1<<20, 0)
	var ce *CompactedError
	if !errors.Is(err, ErrCompacted) || !errors.As(err, &ce) || ce.First != 5 {
		t.Fatalf("compacted: %v", err)
	}
	index, body, err := c.Snapshot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(body)
	body.Close()
	if index != 16 || string(got) != "QSNAP2\nthe store" {
		t.Fatalf("snapshot %d %q", index, got)
	}
	// A copy that fails part way is a read error, never a clean end.
	src.failSnap.Store(true)
	_, body, err = c.Snapshot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(body)
	body.Close()
	if err == nil {
		t.Fatalf("a cut snapshot read whole: %q", got)
	}
	src.failSnap.Store(false)
	if info, err := c.Info(ctx, 0); err != nil || info.CommitIndex != 16 || info.FirstIndex != 5 {
		t.Fatalf("info %+v %v", info, err)
	}
	// A bad request is answered with a JSON error.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig(t, ca, "other").Client()}}
	resp, err := hc.Get(ts.URL + "/link/v1/entries?from=x")
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), `"code":"bad_request"`) {
		t.Fatalf("bad request: %d %s", resp.StatusCode, msg)
	}
	plain := NewClient([]string{live}, "tok", nil)
	defer plain.Close()
	if _, err := plain.Info(ctx, 0); err == nil {
		t.Fatal("a plaintext client read a TLS source")
	}
}
