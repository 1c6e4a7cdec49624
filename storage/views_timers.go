package storage

import (
	"github.com/cockroachdb/pebble"

	"github.com/queen-mq/queen/wire"
)

// TimerInfo is a timer as a reader sees it.
type TimerInfo struct {
	Key          string
	Queue        string
	Partition    string
	DueMs        int64
	Attempts     uint32
	Fired        bool
	Txn          string
	Payload      []byte
	PayloadFlags uint64
}

// Timers lists a queue's timers whose key starts with prefix, after the key
// after, up to limit; truncated says more are left.
func (s *Store) Timers(tenant wire.ID, queue, prefix, after string, limit int) (out []TimerInfo, truncated bool, err error) {
	err = s.scanTimers(tenant, queue, prefix, after, func(t TimerInfo) bool {
		if len(out) == limit {
			truncated = true
			return false
		}
		out = append(out, t)
		return true
	})
	return out, truncated, err
}

// TimerCount counts a queue's pending timers whose key starts with prefix.
func (s *Store) TimerCount(tenant wire.ID, queue, prefix string) (int, error) {
	n := 0
	err := s.scanTimers(tenant, queue, prefix, "", func(t TimerInfo) bool {
		if !t.Fired {
			n++
		}
		return true
	})
	return n, err
}

// Timer returns one timer.
func (s *Store) Timer(tenant wire.ID, queue, key string) (TimerInfo, bool, error) {
	var out TimerInfo
	found := false
	err := s.scanTimers(tenant, queue, key, "", func(t TimerInfo) bool {
		if t.Key == key {
			out, found = t, true
		}
		return false
	})
	return out, found, err
}

func (s *Store) scanTimers(tenant wire.ID, queue, prefix, after string, f func(TimerInfo) bool) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	lower := timerKey(tenant, queue, prefix)
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	defer it.Close()
	start := lower
	if after != "" {
		start = append(timerKey(tenant, queue, after), 0)
	}
	for it.SeekGE(start); it.Valid(); it.Next() {
		t, ok := decodeTimer(it.Value())
		if !ok {
			continue
		}
		_, _, key := splitNSKey(it.Key())
		info := TimerInfo{Key: key, Queue: queue, Partition: t.partition, DueMs: t.dueMs, Attempts: t.attempts,
			Fired: t.fired, Txn: t.txn, Payload: t.payload, PayloadFlags: t.flags}
		if !f(info) {
			break
		}
	}
	return it.Error()
}
