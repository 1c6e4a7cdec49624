package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// derivedState describes what load derives from the store, in a form two
// loads of one store must agree on: tables are compared by what they
// answer (a name table's slots depend on its random key), not by their
// bytes. Ready sets differ legitimately (a walk marks more than a running
// store knew it had to) and are checked by checkReady instead.
func derivedState(t *testing.T, s *Store) string {
	t.Helper()
	defer s.readLock()()
	var b strings.Builder
	ids := make([]uint64, 0, len(s.queuesByID))
	for id := range s.queuesByID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		q := s.queuesByID[id]
		fmt.Fprintf(&b, "queue %d %q home=%v\n", id, q.name, q.home)
		if q.home {
			fmt.Fprintf(&b, "  groups %b in group %v\n", q.groups, q.dirInGroup)
			for i := range q.dir {
				d, ok := q.dirEntry(s.readCommitted, uint32(i))
				if !ok {
					fmt.Fprintf(&b, "  dir %d hole\n", i)
					continue
				}
				at, found := q.dirIndex(s.readCommitted, d.name)
				fmt.Fprintf(&b, "  dir %d %q group %d, found at %d %v\n", i, d.name, d.group, at, found)
			}
		}
		fmt.Fprintf(&b, "  %d partitions, pids %v\n", q.partitionCount(), q.pids)
		for i, pid := range q.pids {
			if pid == 0 {
				continue
			}
			p := s.peekAt(q, uint32(i))
			if p == nil {
				t.Fatalf("queue %q: partition %d at %d does not read", q.name, pid, i)
			}
			at, found := q.partNames.get(p.name, func(i uint32) string { return s.peekAt(q, i).name })
			fmt.Fprintf(&b, "  partition %d %q found at %d %v, holds records %v\n", i, p.name, at, found, q.holdsRecords(uint32(i)))
		}
		fmt.Fprintf(&b, "  gone %v drops %v\n", members(&q.gone), q.dropsPending)
		fmt.Fprintf(&b, "  totals %+v appended %d dlq %d leases %d\n", q.totals, q.appended, q.dlqRows, len(q.leases))
		groups := make([]string, 0, len(q.lags))
		for g := range q.lags {
			groups = append(groups, g)
		}
		slices.Sort(groups)
		for _, g := range groups {
			fmt.Fprintf(&b, "  lag %q %+v\n", g, *q.lags[g])
		}
	}
	leases := make([]string, 0, len(s.leases))
	for id, ref := range s.leases {
		leases = append(leases, fmt.Sprintf("%s %d %s", id, ref.part.id, ref.group))
	}
	slices.Sort(leases)
	fmt.Fprintf(&b, "leases %v\n", leases)
	return b.String()
}

func members(s *readySet) []uint32 {
	var out []uint32
	for i := s.next(0); i >= 0; i = s.next(uint32(i) + 1) {
		out = append(out, uint32(i))
	}
	return out
}

// checkReady fails when a subscription's ready set misses a partition
// that may hold messages for it: the one thing a ready set must never do.
func checkReady(t *testing.T, s *Store) {
	t.Helper()
	defer s.readLock()()
	for _, q := range s.queuesByID {
		for _, sub := range q.subs {
			for i, pid := range q.pids {
				if pid == 0 {
					continue
				}
				if p := s.peekAt(q, uint32(i)); p != nil && readyFor(p, sub) && !sub.ready.has(uint32(i)) {
					t.Fatalf("queue %q group %q: partition %d may hold messages, not in the ready set", q.name, sub.group, i)
				}
			}
		}
	}
}

// What a store loads from its image is what it would load by reading
// every partition: one random workload (pushes, pops with leases left
// open, acks, seeks, group deletes, retention, idle cleanup) on a store
// keeping two partitions in memory, plus a Kafka topic, then the same
// store opened both ways.
func TestALoadImageGivesWhatAWalkGives(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newTwinWorkload(t, seed)
			w.b = newCachedHarness(t, 2)
			w.run(300, func() {})
			h := w.b
			h.allocTopic("topic", 3)
			for i := range 6 {
				h.push("many", fmt.Sprintf("m%d", i), "a", "b")
			}
			if r := h.pop("many", "holder", 1, 60_000); len(r.Claims) != 1 {
				t.Fatalf("a pop to hold a lease: %+v", r)
			}
			h.restart(false)
			imaged := derivedState(t, h.s)
			checkReady(t, h.s)
			h.restart(true)
			walked := derivedState(t, h.s)
			checkReady(t, h.s)
			if imaged != walked {
				t.Fatalf("loaded from the image:\n%s\nloaded by the walk:\n%s", imaged, walked)
			}
			if !strings.Contains(walked, "leases 1\n") {
				t.Fatalf("no lease held across the restarts:\n%s", walked)
			}
		})
	}
}

// imageCopy closes the store, keeps a copy of the load image it wrote and
// opens the store again (from the image, which that open removes).
func (h *harness) imageCopy() (path string, image []byte) {
	h.t.Helper()
	path = imagePath(h.s.dbDir)
	h.s.Close()
	image, err := os.ReadFile(path)
	if err != nil {
		h.t.Fatal(err)
	}
	h.open()
	return path, image
}

// An image is used once: the open that reads it removes it.
func TestALoadImageIsReadOnce(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "a")
	h.restart(false)
	if _, err := os.Stat(imagePath(h.s.dbDir)); !os.IsNotExist(err) {
		t.Fatalf("the image is still there after the open that read it: %v", err)
	}
}

// An image that does not describe the store as it is, or does not read
// whole, is not used: the store reads every partition and answers as
// before.
func TestADamagedOrStaleLoadImageIsNotUsed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, h *harness, image []byte) []byte
	}{
		{"a byte flipped", func(t *testing.T, h *harness, b []byte) []byte { b[len(b)/2] ^= 0x40; return b }},
		{"truncated", func(t *testing.T, h *harness, b []byte) []byte { return b[:len(b)-9] }},
		{"empty", func(t *testing.T, h *harness, b []byte) []byte { return nil }},
		{"another format", func(t *testing.T, h *harness, b []byte) []byte { b[len(imageMagic)] = 9; return b }},
		{"an earlier index", func(t *testing.T, h *harness, b []byte) []byte {
			// The image of the store before one more push.
			h.push("q", "p", "c")
			h.restart(true)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCachedHarness(t, 1)
			h.push("q", "p", "a", "b")
			h.push("q", "r", "a")
			path, b := h.imageCopy()
			b = tc.damage(t, h, b)
			want := derivedState(t, h.s)
			h.s.Close()
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			h.open()
			if h.s.loadedFrom != "walk" {
				t.Fatalf("the store loaded from the %s", h.s.loadedFrom)
			}
			if got := derivedState(t, h.s); got != want {
				t.Fatalf("after the walk:\n%s\nbefore:\n%s", got, want)
			}
			if r := h.pop("q", "g", 10, 1000); len(r.Claims) == 0 {
				t.Fatalf("a pop after the walk: %+v", r)
			}
		})
	}
}

// A store whose apply failed has memory ahead of its database: it writes
// no image, and the next open reads every partition.
func TestADivergedStoreWritesNoImage(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "a")
	h.s.diverged.Store(true)
	path := imagePath(h.s.dbDir)
	h.s.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a diverged store wrote an image: %v", err)
	}
	h.open()
	if h.s.loadedFrom != "walk" {
		t.Fatalf("loaded from the %s", h.s.loadedFrom)
	}
}

// Every queue and subscription of the store is in the image, and an image
// whose queues or subscriptions differ from the store's is refused.
func TestALoadImageOfOtherQueuesIsNotUsed(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "a")
	path, b := h.imageCopy()
	h.push("other", "p", "a") // a queue the image does not know
	h.pop("q", "g", 1, 1000)  // and a subscription
	// Put the old image back under the store's current index, so only its
	// contents can tell it apart.
	h.s.Close()
	binary.LittleEndian.PutUint64(b[len(imageMagic)+8:], h.s.applied.Load())
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	h.open()
	if h.s.loadedFrom != "walk" {
		t.Fatalf("loaded from the %s", h.s.loadedFrom)
	}
	if info, ok := h.s.Queue(wire.DefaultTenant, "other"); !ok || info.Partitions != 1 {
		t.Fatalf("queue other after the walk: %+v %v", info, ok)
	}
}
