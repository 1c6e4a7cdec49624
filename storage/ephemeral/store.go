// Package ephemeral is the in-memory engine of ephemeral (RAM class)
// queues (spec §1.11, §2.15): messages, leases, retries, TTL and the
// memory bounds of one node. It owns only the partitions this node holds
// right now; which node owns a partition, forwarding and hand-over are the
// HTTP layer's business (http/api/ephemeral_ring.go), which moves
// partitions in and out with Take and Adopt.
//
// It never touches raft, the disk or the network: a crash loses what it
// holds, as the spec accepts. Every method takes the time as an argument so
// tests drive the clock; nothing here starts a goroutine.
package ephemeral

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Policies for a full queue (spec §1.11).
const (
	PolicyReject     = "reject"
	PolicyDropOldest = "dropOldest"
)

// Overhead is what one message costs besides its payload (id, partition,
// bookkeeping), so that a flood of empty payloads is bounded too.
const Overhead = 96

// Errors the HTTP layer maps to statuses.
var (
	// ErrFull: the push does not fit (policy reject, or dropOldest with
	// nothing of this queue's left to drop). Nothing was stored.
	ErrFull = errors.New("ephemeral queue full")
	// ErrMoved: this store is sealed (the node is handing over); the
	// caller routes the request to the partition's next owner.
	ErrMoved = errors.New("ephemeral partition moved")
	// ErrNotFound: no such queue.
	ErrNotFound = errors.New("ephemeral queue not found")
	// ErrBadOptions: an option is out of range.
	ErrBadOptions = errors.New("bad ephemeral queue options")
)

// Options are one queue's settings.
type Options struct {
	MaxBytes     int64         `json:"maxBytes"`
	MaxLength    int           `json:"maxLength"`
	Policy       string        `json:"policy"`
	TTL          time.Duration `json:"ttl"`
	Lease        time.Duration `json:"lease"`
	RetryLimit   int           `json:"retryLimit"`
	WindowBuffer time.Duration `json:"windowBuffer"`
}

// Validate says why options cannot be used.
func (o Options) Validate() error {
	switch {
	case o.MaxBytes <= 0:
		return fmt.Errorf("%w: maxBytes must be positive", ErrBadOptions)
	case o.MaxLength <= 0:
		return fmt.Errorf("%w: maxLength must be positive", ErrBadOptions)
	case o.Policy != PolicyReject && o.Policy != PolicyDropOldest:
		return fmt.Errorf("%w: policy must be reject or dropOldest", ErrBadOptions)
	case o.TTL < 0 || o.WindowBuffer < 0:
		return fmt.Errorf("%w: ttlSeconds and windowBuffer must not be negative", ErrBadOptions)
	case o.Lease < time.Second:
		return fmt.Errorf("%w: leaseSeconds must be at least 1", ErrBadOptions)
	case o.RetryLimit < 0:
		return fmt.Errorf("%w: retryLimit must not be negative", ErrBadOptions)
	}
	return nil
}

// Config bounds the node.
type Config struct {
	MaxBytes     int64         // QUEEN_EPHEMERAL_MAX_BYTES: the node's cap over all queues
	Defaults     Options       // a new queue's options
	ImplicitIdle time.Duration // QUEEN_EPHEMERAL_IMPLICIT_IDLE_S
}

// DefaultConfig is the spec's §8.3 defaults.
func DefaultConfig() Config {
	return Config{
		MaxBytes: 256 << 20,
		Defaults: Options{MaxBytes: 16 << 20, MaxLength: 10000, Policy: PolicyReject,
			Lease: 30 * time.Second, RetryLimit: 5},
		ImplicitIdle: 300 * time.Second,
	}
}

// Key names one partition.
type Key struct {
	Tenant    string `json:"tenant"`
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
}

// Message is one stored message. LeaseUntil is zero when not leased.
type Message struct {
	ID         string    `json:"id"`
	Payload    []byte    `json:"payload"`
	Created    time.Time `json:"created"`
	Attempts   int       `json:"attempts"` // deliveries so far
	Failures   int       `json:"failures"` // failed acks so far (the retry budget)
	LeaseUntil time.Time `json:"leaseUntil"`
	Group      string    `json:"group"`
	seq        uint64
}

func (m *Message) cost() int64 { return int64(len(m.Payload)) + Overhead }

// Delivery is a popped message.
type Delivery struct {
	ID        string
	Partition string
	Payload   []byte
	Attempts  int
}

type qkey struct{ tenant, queue string }

type partition struct {
	msgs     []*Message // push order
	lastPush time.Time
}

type queue struct {
	opts     Options
	explicit bool // configured, not created by a push: never idle-expired
	parts    map[string]*partition
	byID     map[string]string // message id → partition
	bytes    int64
	length   int
	lastUse  time.Time
}

// Stats are the node's counters.
type Stats struct {
	Bytes    int64
	Messages int
	Queues   int
	Dropped  uint64 // by dropOldest, TTL, or retry limit
	Rejected uint64 // pushes refused for space
}

// Store is one node's ephemeral messages. Safe for concurrent use.
type Store struct {
	cfg     Config
	mu      sync.Mutex
	queues  map[qkey]*queue
	bytes   int64
	seq     uint64
	sealed  bool
	stats   Stats
	changed chan struct{} // closed and replaced when something becomes poppable
}

// New is an empty store.
func New(cfg Config) *Store {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultConfig().MaxBytes
	}
	return &Store{cfg: cfg, queues: map[qkey]*queue{}, changed: make(chan struct{})}
}

// Defaults are a new queue's options.
func (s *Store) Defaults() Options { return s.cfg.Defaults }

// Changed is closed the next time a message may have become poppable.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Seal refuses every later call that reads or writes messages (ErrMoved):
// the node is leaving, and what arrives now belongs to the next owner.
func (s *Store) Seal() {
	s.mu.Lock()
	s.sealed = true
	s.notifyLocked() // wake parked pops so they re-route
	s.mu.Unlock()
}

func (s *Store) queueLocked(tenant, name string, now time.Time, create bool) *queue {
	k := qkey{tenant, name}
	q := s.queues[k]
	if q == nil && create {
		q = &queue{opts: s.cfg.Defaults, parts: map[string]*partition{}, byID: map[string]string{}}
		s.queues[k] = q
	}
	if q != nil {
		q.lastUse = now
	}
	return q
}

// Configure sets a queue's options, creating it (explicit queues never
// idle-expire). Messages already stored stay, even over new caps.
func (s *Store) Configure(tenant, name string, o Options, now time.Time) error {
	if err := o.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queueLocked(tenant, name, now, true)
	q.opts, q.explicit = o, true
	return nil
}

// Options are a queue's options (the defaults for an unknown queue).
func (s *Store) Options(tenant, name string) Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[qkey{tenant, name}]; q != nil {
		return q.opts
	}
	return s.cfg.Defaults
}

// Push stores payloads at the tail of a partition, all or none.
func (s *Store) Push(k Key, payloads [][]byte, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return ErrMoved
	}
	q := s.queueLocked(k.Tenant, k.Queue, now, true)
	var need int64
	for _, p := range payloads {
		need += int64(len(p)) + Overhead
	}
	if err := s.makeRoomLocked(q, need, len(payloads)); err != nil {
		s.stats.Rejected++
		if len(q.parts) == 0 && !q.explicit {
			delete(s.queues, qkey{k.Tenant, k.Queue})
		}
		return err
	}
	p := q.parts[k.Partition]
	if p == nil {
		p = &partition{}
		q.parts[k.Partition] = p
	}
	for _, payload := range payloads {
		s.seq++
		m := &Message{ID: newID(), Payload: slices.Clone(payload), Created: now, seq: s.seq}
		p.msgs = append(p.msgs, m)
		q.byID[m.ID] = k.Partition
		q.bytes += m.cost()
		q.length++
		s.bytes += m.cost()
	}
	p.lastPush = now
	s.notifyLocked()
	return nil
}

// makeRoomLocked checks that need bytes in n messages fit the queue's and
// the node's caps, dropping this queue's oldest messages under dropOldest.
// It decides before dropping anything, so a push that cannot fit drops
// nothing. A queue never drops another queue's messages to make room: one
// tenant's flood must not evict another's data.
func (s *Store) makeRoomLocked(q *queue, need int64, n int) error {
	fits := func() bool {
		return q.bytes+need <= q.opts.MaxBytes && q.length+n <= q.opts.MaxLength && s.bytes+need <= s.cfg.MaxBytes
	}
	if fits() {
		return nil
	}
	// Even with every message of this queue gone, would it fit?
	if q.opts.Policy != PolicyDropOldest || need > q.opts.MaxBytes || n > q.opts.MaxLength ||
		s.bytes-q.bytes+need > s.cfg.MaxBytes {
		return ErrFull
	}
	for !fits() {
		s.dropOldestLocked(q)
	}
	return nil
}

func (s *Store) dropOldestLocked(q *queue) {
	var oldest *partition
	for _, p := range q.parts {
		if len(p.msgs) > 0 && (oldest == nil || p.msgs[0].seq < oldest.msgs[0].seq) {
			oldest = p
		}
	}
	s.removeLocked(q, oldest, 0)
	s.stats.Dropped++
}

func (s *Store) removeLocked(q *queue, p *partition, i int) {
	m := p.msgs[i]
	p.msgs = slices.Delete(p.msgs, i, i+1)
	delete(q.byID, m.ID)
	q.bytes -= m.cost()
	q.length--
	s.bytes -= m.cost()
}

// Pop leases (or, with commitOnDelivery, removes) up to batch poppable
// messages of a partition in order. Expired leases are poppable again;
// TTL-expired messages are dropped on the way.
func (s *Store) Pop(k Key, group string, batch int, commitOnDelivery bool, leaseOverride time.Duration, now time.Time) ([]Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return nil, ErrMoved
	}
	q := s.queues[qkey{k.Tenant, k.Queue}]
	if q == nil {
		return nil, nil
	}
	q.lastUse = now
	p := q.parts[k.Partition]
	if p == nil || len(p.msgs) == 0 {
		return nil, nil
	}
	if q.opts.WindowBuffer > 0 && now.Sub(p.lastPush) < q.opts.WindowBuffer {
		return nil, nil // the partition is not quiet yet (batching window)
	}
	lease := q.opts.Lease
	if leaseOverride > 0 {
		lease = leaseOverride
	}
	var out []Delivery
	for i := 0; i < len(p.msgs) && len(out) < batch; {
		m := p.msgs[i]
		if q.opts.TTL > 0 && now.Sub(m.Created) >= q.opts.TTL {
			s.removeLocked(q, p, i)
			s.stats.Dropped++
			continue
		}
		if m.LeaseUntil.After(now) {
			i++
			continue
		}
		m.Attempts++
		out = append(out, Delivery{ID: m.ID, Partition: k.Partition, Payload: m.Payload, Attempts: m.Attempts})
		if commitOnDelivery {
			s.removeLocked(q, p, i)
			continue
		}
		m.LeaseUntil, m.Group = now.Add(lease), group
		i++
	}
	return out, nil
}

// Ack outcomes (spec §2.15), plus dropped: a failed ack past retryLimit.
const (
	Acked       = "acked"
	Redelivered = "redelivered"
	Stale       = "stale"
	Unknown     = "unknown"
	Dropped     = "dropped"
)

// Ack statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusRetry     = "retry"
)

// Ack settles one leased message. completed removes it; failed spends one
// retry and makes it poppable again (past retryLimit it is dropped); retry
// makes it poppable again without spending. A message whose lease has
// expired or that another group holds is stale and left alone: the
// consumer lost it and it will be delivered again.
func (s *Store) Ack(tenant, name, group, id, status string, now time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return "", ErrMoved
	}
	q := s.queues[qkey{tenant, name}]
	if q == nil {
		return Unknown, nil
	}
	q.lastUse = now
	pname, ok := q.byID[id]
	if !ok {
		return Unknown, nil
	}
	p := q.parts[pname]
	i := slices.IndexFunc(p.msgs, func(m *Message) bool { return m.ID == id })
	m := p.msgs[i]
	if !m.LeaseUntil.After(now) || m.Group != group {
		return Stale, nil
	}
	switch status {
	case StatusCompleted:
		s.removeLocked(q, p, i)
		return Acked, nil
	case StatusFailed:
		m.Failures++
		if m.Failures > q.opts.RetryLimit {
			s.removeLocked(q, p, i)
			s.stats.Dropped++
			return Dropped, nil
		}
	}
	m.LeaseUntil, m.Group = time.Time{}, ""
	s.notifyLocked()
	return Redelivered, nil
}

// Reset empties a queue, keeping its options.
func (s *Store) Reset(tenant, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[qkey{tenant, name}]
	if q == nil {
		return ErrNotFound
	}
	s.bytes -= q.bytes
	q.parts, q.byID, q.bytes, q.length = map[string]*partition{}, map[string]string{}, 0, 0
	return nil
}

// Delete removes a queue and its messages.
func (s *Store) Delete(tenant, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[qkey{tenant, name}]
	if q == nil {
		return ErrNotFound
	}
	s.bytes -= q.bytes
	delete(s.queues, qkey{tenant, name})
	return nil
}

// QueueInfo describes one queue held here.
type QueueInfo struct {
	Name       string         `json:"name"`
	Messages   int            `json:"messages"`
	Bytes      int64          `json:"bytes"`
	Leased     int            `json:"leased"`
	Partitions map[string]int `json:"partitions"`
	Options    Options        `json:"-"`
}

// Queues lists a tenant's queues held on this node (name order).
func (s *Store) Queues(tenant string, now time.Time) []QueueInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []QueueInfo
	for k, q := range s.queues {
		if k.tenant != tenant {
			continue
		}
		info := QueueInfo{Name: k.queue, Messages: q.length, Bytes: q.bytes, Partitions: map[string]int{}, Options: q.opts}
		for name, p := range q.parts {
			info.Partitions[name] = len(p.msgs)
			for _, m := range p.msgs {
				if m.LeaseUntil.After(now) {
					info.Leased++
				}
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Stats are the node's counters now.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Bytes, st.Queues = s.bytes, len(s.queues)
	for _, q := range s.queues {
		st.Messages += q.length
	}
	return st
}

// Sweep drops TTL-expired messages, removes implicit queues idle and
// empty for longer than ImplicitIdle, and wakes parked pops when leases
// have expired. The HTTP layer's ring loop calls it once a second.
func (s *Store) Sweep(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	expired := false
	for k, q := range s.queues {
		for _, p := range q.parts {
			for i := 0; i < len(p.msgs); {
				m := p.msgs[i]
				if q.opts.TTL > 0 && now.Sub(m.Created) >= q.opts.TTL {
					s.removeLocked(q, p, i)
					s.stats.Dropped++
					continue
				}
				if !m.LeaseUntil.IsZero() && !m.LeaseUntil.After(now) {
					expired = true
				}
				i++
			}
		}
		for name, p := range q.parts {
			if len(p.msgs) == 0 && now.Sub(p.lastPush) >= s.cfg.ImplicitIdle {
				delete(q.parts, name)
			}
		}
		if !q.explicit && q.length == 0 && s.cfg.ImplicitIdle > 0 && now.Sub(q.lastUse) >= s.cfg.ImplicitIdle {
			delete(s.queues, k)
		}
	}
	if expired {
		s.notifyLocked()
	}
}

// Dump is one partition on its way to another node.
type Dump struct {
	Key      Key       `json:"key"`
	Options  Options   `json:"options"`
	Explicit bool      `json:"explicit"`
	Messages []Message `json:"messages"`
}

// Take removes and returns every partition for which move says yes
// (partitions this node no longer owns). With the store sealed it takes
// everything still held.
func (s *Store) Take(move func(Key) bool) []Dump {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Dump
	for k, q := range s.queues {
		for name, p := range q.parts {
			key := Key{k.tenant, k.queue, name}
			if !move(key) {
				continue
			}
			d := Dump{Key: key, Options: q.opts, Explicit: q.explicit}
			for _, m := range p.msgs {
				d.Messages = append(d.Messages, *m)
				delete(q.byID, m.ID)
				q.bytes -= m.cost()
				q.length--
				s.bytes -= m.cost()
			}
			delete(q.parts, name)
			out = append(out, d)
		}
		if len(q.parts) == 0 && !q.explicit {
			delete(s.queues, k)
		}
	}
	return out
}

// Adopt takes in partitions handed over by another node. Their messages
// are older than any pushed here since the owner changed, so they go
// before them; leases and attempt counts travel with them, so a consumer
// that popped from the old owner can still ack here. Only the node cap is
// enforced (a hand-over must not be refused for a queue cap the old owner
// already allowed); messages past it are counted as lost.
func (s *Store) Adopt(dumps []Dump, now time.Time) (accepted, lost int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return 0, 0, ErrMoved
	}
	for _, d := range dumps {
		q := s.queueLocked(d.Key.Tenant, d.Key.Queue, now, true)
		if d.Explicit && !q.explicit {
			q.opts, q.explicit = d.Options, true
		} else if len(q.parts) == 0 && q.length == 0 && !q.explicit {
			q.opts = d.Options
		}
		p := q.parts[d.Key.Partition]
		if p == nil {
			p = &partition{lastPush: now}
			q.parts[d.Key.Partition] = p
		}
		var in []*Message
		for i := range d.Messages {
			m := d.Messages[i]
			if _, dup := q.byID[m.ID]; dup {
				continue // a retried hand-over
			}
			if s.bytes+m.cost() > s.cfg.MaxBytes {
				lost++
				continue
			}
			s.seq++
			m.seq = s.seq
			in = append(in, &m)
			q.byID[m.ID] = d.Key.Partition
			q.bytes += m.cost()
			q.length++
			s.bytes += m.cost()
			accepted++
		}
		p.msgs = append(in, p.msgs...)
	}
	s.notifyLocked()
	return accepted, lost, nil
}

// newID is a UUIDv7: time-ordered, unique across nodes without
// coordination, so an id survives a hand-over unchanged.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return uuid.UUID(b).String()
	}
	return id.String()
}
