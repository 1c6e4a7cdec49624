package broker

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/wire"
)

// KIP-932 share sessions: a share consumer's ShareFetch and
// ShareAcknowledge requests to one broker form a session, numbered by
// ShareSessionEpoch. Epoch 0 opens one (replacing any earlier one of the
// member), each later request carries the epoch after the last one
// answered, -1 closes it. The session remembers the partitions the member
// fetches (a request lists only those it adds, and forgets others) and
// the lease each of them was last acquired under, so acknowledgements are
// fenced by it, a renewal extends it, and closing the session releases
// what the member still holds.

// maxShareSessions bounds the sessions one node keeps. When full, a new
// session replaces the one idle longest if that one has been idle for
// shareSessionIdle; otherwise it is refused SHARE_SESSION_LIMIT_REACHED
// (retriable).
const (
	maxShareSessions = 10000
	shareSessionIdle = 2 * time.Minute
)

// tidp is a partition of a topic, by topic id.
type tidp struct {
	id   [16]byte
	part int32
}

type shareSessionKey struct {
	tenant        wire.ID
	group, member string
}

type shareSession struct {
	epoch    int32 // the epoch the next request must carry
	parts    map[tidp]struct{}
	leases   map[tidp]shareLease
	lastUsed time.Time
}

// shareLease is the lease a partition's records were last acquired under
// in a session: records [from, to).
type shareLease struct {
	id       wire.ID
	from, to uint64
}

type shareSessions struct {
	mu  sync.Mutex
	m   map[shareSessionKey]*shareSession
	now func() time.Time
}

func newShareSessions() *shareSessions {
	return &shareSessions{m: map[shareSessionKey]*shareSession{}, now: time.Now}
}

// begin checks a request's epoch against the member's session and, when
// it may proceed, returns the session and moves it to the next epoch.
// Epoch 0 opens a new session, when mayOpen (a ShareFetch); epoch -1
// closes the session, which is returned for its leases.
func (s *shareSessions) begin(k shareSessionKey, epoch int32, mayOpen bool) (*shareSession, *kerr.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cur := s.m[k]
	switch {
	case epoch == 0:
		if !mayOpen {
			return nil, kerr.InvalidShareSessionEpoch
		}
		if cur == nil && len(s.m) >= maxShareSessions && !s.evictIdle(now) {
			return nil, kerr.ShareSessionLimitReached
		}
		cur = &shareSession{epoch: 1, parts: map[tidp]struct{}{}, leases: map[tidp]shareLease{}, lastUsed: now}
		s.m[k] = cur
		return cur, nil
	case epoch == -1:
		if cur == nil {
			return nil, kerr.ShareSessionNotFound
		}
		delete(s.m, k)
		return cur, nil
	case cur == nil:
		return nil, kerr.ShareSessionNotFound
	case epoch != cur.epoch:
		return nil, kerr.InvalidShareSessionEpoch
	}
	cur.epoch = max(1, cur.epoch+1) // MaxInt32 wraps to 1, as in Kafka
	cur.lastUsed = now
	return cur, nil
}

// evictIdle drops the session idle longest when it has been idle long
// enough, and reports whether it did.
func (s *shareSessions) evictIdle(now time.Time) bool {
	var oldest shareSessionKey
	var at time.Time
	for k, ss := range s.m {
		if at.IsZero() || ss.lastUsed.Before(at) {
			oldest, at = k, ss.lastUsed
		}
	}
	if at.IsZero() || now.Sub(at) < shareSessionIdle {
		return false
	}
	delete(s.m, oldest)
	return true
}

// update runs f on a session under the sessions' lock (a session's
// partitions and leases are read and written by its requests, which a
// client may pipeline).
func (s *shareSessions) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}
