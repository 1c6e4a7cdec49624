package storage

import "math/bits"

// readySet is the set of partition indexes of a queue that may hold messages
// for one consumer group. It may hold false positives (a pop verifies and
// clears them) but never misses a partition with messages. Two levels of
// bitmaps make "next member at or after i" cheap even with millions of
// partitions, and iteration order is by index, so every replica scanning the
// same set makes the same choices.
type readySet struct {
	words   []uint64 // bit i%64 of words[i/64]: partition i is a member
	summary []uint64 // bit j%64 of summary[j/64]: words[j] != 0
}

func (s *readySet) set(i uint32) {
	w := int(i / 64)
	if w >= len(s.words) {
		s.words = append(s.words, make([]uint64, w+1-len(s.words))...)
		if need := (len(s.words) + 63) / 64; need > len(s.summary) {
			s.summary = append(s.summary, make([]uint64, need-len(s.summary))...)
		}
	}
	s.words[w] |= 1 << (i % 64)
	s.summary[w/64] |= 1 << (w % 64)
}

func (s *readySet) clear(i uint32) {
	w := int(i / 64)
	if w >= len(s.words) {
		return
	}
	s.words[w] &^= 1 << (i % 64)
	if s.words[w] == 0 {
		s.summary[w/64] &^= 1 << (w % 64)
	}
}

func (s *readySet) has(i uint32) bool {
	w := int(i / 64)
	return w < len(s.words) && s.words[w]&(1<<(i%64)) != 0
}

// next returns the smallest member >= i, or -1.
func (s *readySet) next(i uint32) int64 {
	w := int(i / 64)
	if w >= len(s.words) {
		return -1
	}
	if m := s.words[w] >> (i % 64); m != 0 {
		return int64(i) + int64(bits.TrailingZeros64(m))
	}
	// Find the next non-empty word through the summary.
	w++
	for sw := w / 64; sw < len(s.summary); sw++ {
		m := s.summary[sw]
		if sw == w/64 {
			m &^= (1 << (w % 64)) - 1
		}
		if m != 0 {
			wi := sw*64 + bits.TrailingZeros64(m)
			return int64(wi)*64 + int64(bits.TrailingZeros64(s.words[wi]))
		}
	}
	return -1
}

// forEachFrom calls f for every member, starting at start and wrapping
// around, until f returns false. f may clear the member it is given.
func (s *readySet) forEachFrom(start uint32, f func(i uint32) bool) {
	for i := s.next(start); i >= 0; i = s.next(uint32(i) + 1) {
		if !f(uint32(i)) {
			return
		}
		if i == 1<<32-1 {
			break
		}
	}
	for i := s.next(0); i >= 0 && uint32(i) < start; i = s.next(uint32(i) + 1) {
		if !f(uint32(i)) {
			return
		}
	}
}
