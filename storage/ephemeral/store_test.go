package ephemeral

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testStore(maxBytes int64, o func(*Options)) *Store {
	cfg := DefaultConfig()
	cfg.MaxBytes = maxBytes
	if o != nil {
		o(&cfg.Defaults)
	}
	return New(cfg)
}

func payloads(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size)
		copy(out[i], fmt.Sprint(i))
	}
	return out
}

var k = Key{"t", "q", "p"}

// A lease hides a message until it expires or is acked; expiry makes it
// poppable again with the attempt counted, and an ack after expiry is
// stale.
func TestLeaseExpiryRedeliversAndStaleAck(t *testing.T) {
	s := testStore(1<<20, func(o *Options) { o.Lease = 10 * time.Second })
	if err := s.Push(k, payloads(2, 10), t0); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Pop(k, "g", 1, false, 0, t0)
	if len(d) != 1 || d[0].Attempts != 1 {
		t.Fatalf("first pop %+v", d)
	}
	d2, _ := s.Pop(k, "g", 5, false, 0, t0.Add(time.Second))
	if len(d2) != 1 || d2[0].ID == d[0].ID {
		t.Fatalf("leased message popped again: %+v", d2)
	}
	d3, _ := s.Pop(k, "g", 5, false, 0, t0.Add(11*time.Second))
	if len(d3) != 2 || d3[0].ID != d[0].ID || d3[0].Attempts != 2 {
		t.Fatalf("after expiry want both, first again with attempts 2: %+v", d3)
	}
	if out, _ := s.Ack("t", "q", "g", d3[0].ID, StatusCompleted, t0.Add(22*time.Second)); out != Stale {
		t.Fatalf("ack after expiry = %s, want stale", out)
	}
	if out, _ := s.Ack("t", "q", "other", d3[1].ID, StatusCompleted, t0.Add(12*time.Second)); out != Stale {
		t.Fatalf("ack by another group = %s, want stale", out)
	}
	if out, _ := s.Ack("t", "q", "g", d3[1].ID, StatusCompleted, t0.Add(12*time.Second)); out != Acked {
		t.Fatalf("ack = %s, want acked", out)
	}
	if out, _ := s.Ack("t", "q", "g", d3[1].ID, StatusCompleted, t0.Add(12*time.Second)); out != Unknown {
		t.Fatalf("second ack = %s, want unknown", out)
	}
	if st := s.Stats(); st.Messages != 1 || st.Bytes != 10+Overhead {
		t.Fatalf("stats %+v", st)
	}
}

// failed spends the retry budget and is dropped past retryLimit; retry
// redelivers without spending.
func TestRetryLimit(t *testing.T) {
	s := testStore(1<<20, func(o *Options) { o.RetryLimit = 2 })
	_ = s.Push(k, payloads(1, 1), t0)
	for i := 0; i < 5; i++ {
		d, _ := s.Pop(k, "g", 1, false, 0, t0)
		if out, _ := s.Ack("t", "q", "g", d[0].ID, StatusRetry, t0); out != Redelivered {
			t.Fatalf("retry = %s", out)
		}
	}
	for i, want := range []string{Redelivered, Redelivered, Dropped} {
		d, _ := s.Pop(k, "g", 1, false, 0, t0)
		if len(d) != 1 {
			t.Fatalf("round %d: nothing to pop", i)
		}
		if out, _ := s.Ack("t", "q", "g", d[0].ID, StatusFailed, t0); out != want {
			t.Fatalf("round %d: failed ack = %s, want %s", i, out, want)
		}
	}
	if st := s.Stats(); st.Messages != 0 || st.Bytes != 0 || st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TTL drops messages at pop and in the sweep; commitOnDelivery removes at
// pop.
func TestTTLAndCommitOnDelivery(t *testing.T) {
	s := testStore(1<<20, func(o *Options) { o.TTL = 5 * time.Second })
	_ = s.Push(k, payloads(3, 1), t0)
	_ = s.Push(k, payloads(1, 1), t0.Add(4*time.Second))
	d, _ := s.Pop(k, "g", 10, true, 0, t0.Add(6*time.Second))
	if len(d) != 1 {
		t.Fatalf("want only the young message, got %d", len(d))
	}
	if st := s.Stats(); st.Messages != 0 || st.Dropped != 3 || st.Bytes != 0 {
		t.Fatalf("stats %+v", st)
	}
	_ = s.Push(k, payloads(2, 1), t0.Add(10*time.Second))
	s.Sweep(t0.Add(20 * time.Second))
	if st := s.Stats(); st.Messages != 0 || st.Bytes != 0 {
		t.Fatalf("after sweep %+v", st)
	}
}

// reject refuses a push that does not fit, storing none of it; the node
// cap holds across queues.
func TestCapReject(t *testing.T) {
	per := int64(100 + Overhead)
	s := testStore(10*per, func(o *Options) { o.MaxLength = 8 })
	q2 := Key{"t", "q2", "p"}
	if err := s.Push(k, payloads(6, 100), t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Push(k, payloads(3, 100), t0); !errors.Is(err, ErrFull) {
		t.Fatalf("over maxLength: %v", err)
	}
	if err := s.Push(q2, payloads(5, 100), t0); !errors.Is(err, ErrFull) {
		t.Fatalf("over the node cap: %v", err)
	}
	if err := s.Push(q2, payloads(4, 100), t0); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Bytes != 10*per || st.Messages != 10 || st.Rejected != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// dropOldest makes room from the same queue's oldest messages, never
// another queue's; a push that could not fit even so drops nothing.
func TestCapDropOldest(t *testing.T) {
	per := int64(100 + Overhead)
	s := testStore(10*per, func(o *Options) { o.Policy = PolicyDropOldest; o.MaxBytes = 6 * per })
	other := Key{"t", "other", "p"}
	_ = s.Push(other, payloads(4, 100), t0)
	for i := 0; i < 20; i++ {
		kp := Key{"t", "q", fmt.Sprint("p", i%3)}
		if err := s.Push(kp, [][]byte{append(make([]byte, 99), byte(i))}, t0); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.Bytes > 10*per {
			t.Fatalf("node over cap: %+v", st)
		}
	}
	infos := s.Queues("t", t0)
	if infos[0].Name != "other" || infos[0].Messages != 4 || infos[1].Messages != 6 {
		t.Fatalf("queues %+v", infos)
	}
	// The six left are the newest: 14..19.
	seen := map[byte]bool{}
	for _, p := range []string{"p0", "p1", "p2"} {
		d, _ := s.Pop(Key{"t", "q", p}, "g", 10, true, 0, t0)
		for _, m := range d {
			seen[m.Payload[99]] = true
		}
	}
	for i := byte(14); i < 20; i++ {
		if !seen[i] {
			t.Fatalf("newest message %d dropped; kept %v", i, seen)
		}
	}
	before := s.Stats()
	if err := s.Push(k, payloads(7, 100), t0); !errors.Is(err, ErrFull) {
		t.Fatalf("a push larger than the queue cap: %v", err)
	}
	if after := s.Stats(); after.Bytes != before.Bytes || after.Dropped != before.Dropped {
		t.Fatalf("refused push changed the store: %+v → %+v", before, after)
	}
}

// Take and Adopt move partitions with their leases; adopted messages go
// before those pushed at the new owner; a sealed store refuses.
func TestTakeAdoptAndSeal(t *testing.T) {
	a, b := testStore(1<<20, nil), testStore(1<<20, nil)
	_ = a.Push(k, payloads(3, 5), t0)
	d, _ := a.Pop(k, "g", 1, false, 0, t0)
	_ = b.Push(k, [][]byte{[]byte("new")}, t0)
	dumps := a.Take(func(Key) bool { return true })
	if n, lost, err := b.Adopt(dumps, t0); n != 3 || lost != 0 || err != nil {
		t.Fatalf("adopt %d %d %v", n, lost, err)
	}
	if st := a.Stats(); st.Bytes != 0 || st.Messages != 0 {
		t.Fatalf("source keeps %+v", st)
	}
	if out, _ := b.Ack("t", "q", "g", d[0].ID, StatusCompleted, t0); out != Acked {
		t.Fatalf("ack of a lease taken at the old owner = %s", out)
	}
	got, _ := b.Pop(k, "g", 10, true, 0, t0)
	if len(got) != 3 || string(got[2].Payload) != "new" {
		t.Fatalf("order after adopt: %+v", got)
	}
	a.Seal()
	if err := a.Push(k, payloads(1, 1), t0); !errors.Is(err, ErrMoved) {
		t.Fatalf("push on sealed: %v", err)
	}
}

// Concurrent pushes, pops and acks keep the byte count exact (run with
// -race).
func TestConcurrentAccounting(t *testing.T) {
	s := testStore(1<<20, func(o *Options) { o.Policy = PolicyDropOldest; o.MaxLength = 50 })
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			kp := Key{"t", "q", fmt.Sprint(w % 2)}
			for i := 0; i < 300; i++ {
				_ = s.Push(kp, payloads(2, i%50), t0)
				d, _ := s.Pop(kp, "g", 1, false, 0, t0)
				for _, m := range d {
					_, _ = s.Ack("t", "q", "g", m.ID, StatusCompleted, t0)
				}
			}
		}(w)
	}
	wg.Wait()
	var sum int64
	for _, q := range s.Queues("t", t0) {
		sum += q.Bytes
	}
	if st := s.Stats(); st.Bytes != sum || st.Messages > 50 {
		t.Fatalf("stats %+v, queues hold %d bytes", st, sum)
	}
}
