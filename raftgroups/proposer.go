package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/client"

	"github.com/queen-mq/queen/wire"
)

// request is one caller's commands; they always travel in the same raft
// entry, so a caller's commands are applied together or not at all.
type request struct {
	cmds []wire.Command
	size int
	done chan reply
}

type reply struct {
	results [][]byte
	err     error
}

// proposer is a group's group-commit loop: it gathers whatever requests are
// waiting into one raft entry (until gatherBytes), keeps up to MaxInFlight
// entries and MaxInFlightBytes of them in flight, and fans results back out. While entries are in flight
// new requests queue up, so the busier the group, the larger its entries and
// the fewer fsyncs per request.
//
// No entry is ever larger than entryLimit (QUEEN_RAFT_ENTRY_MAX_BYTES),
// which the transport and dragonboat accept: an entry over it would be
// refused by every follower, resent forever, and the group would never
// commit again. A request that would take an entry past it waits for the
// next entry; a request larger than it alone is refused with ErrTooLarge.
type proposer struct {
	nh             *dragonboat.NodeHost
	shardID        uint64
	replicaID      uint64
	session        *client.Session
	group          int
	in             chan *request
	slots          chan struct{}
	inFlight       *inFlightBytes // entry bytes proposed and not answered
	gatherBytes    int            // stop gathering once an entry is this large
	entryLimit     int            // command bytes no entry may exceed
	held           *request       // taken from in but left for the next entry (run's goroutine only)
	nowMs          func() int64   // the node's clock, which stamps every entry
	attemptTimeout time.Duration
	requestTimeout time.Duration
	disk           *diskGuard
	latency        *metrics.PrometheusHistogram // stamp to result of each committed entry; nil in tests
	stop           chan struct{}
	wg             sync.WaitGroup
	// refuses, when set, refuses a request before it is queued: a
	// standby's group takes only the link's commands (standby.go).
	refuses atomic.Pointer[func([]wire.Command) bool]
}

func newProposer(nh *dragonboat.NodeHost, shardID uint64, group int, cfg *Config, disk *diskGuard, nowMs func() int64) *proposer {
	return &proposer{
		nh:             nh,
		shardID:        shardID,
		replicaID:      cfg.NodeID,
		session:        nh.GetNoOPSession(shardID),
		group:          group,
		in:             make(chan *request, cfg.QueueDepth),
		slots:          make(chan struct{}, cfg.MaxInFlight),
		inFlight:       newInFlightBytes(cfg.MaxInFlightBytes),
		gatherBytes:    cfg.MaxBatchBytes,
		entryLimit:     cfg.MaxEntryBytes,
		attemptTimeout: cfg.AttemptTimeout,
		requestTimeout: cfg.RequestTimeout,
		disk:           disk,
		nowMs:          nowMs,
		stop:           make(chan struct{}),
	}
}

func (p *proposer) start() {
	p.wg.Add(1)
	go p.run()
}

// close stops gathering, fails what is queued and waits for in-flight
// entries to finish their current attempt.
func (p *proposer) close() {
	close(p.stop)
	p.wg.Wait()
	if p.held != nil {
		p.held.done <- reply{err: ErrClosed}
		p.held = nil
	}
	for {
		select {
		case r := <-p.in:
			r.done <- reply{err: ErrClosed}
		default:
			return
		}
	}
}

// submit queues cmds and waits for their results. A full queue is refused at
// once (ErrOverloaded) rather than letting memory grow.
func (p *proposer) submit(ctx context.Context, cmds []wire.Command) ([][]byte, error) {
	wait, err := p.enqueue(cmds)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// enqueue queues cmds and returns the function that waits for their
// results. Requests queued one after the other from one goroutine are
// proposed, and so applied, in that order (unless a proposal has to be
// retried).
func (p *proposer) enqueue(cmds []wire.Command) (func(context.Context) ([][]byte, error), error) {
	r := &request{cmds: cmds, done: make(chan reply, 1)}
	for _, c := range cmds {
		r.size += c.EncodedLen()
	}
	if r.size > p.entryLimit || len(cmds) > wire.MaxCommandsPerEntry {
		return nil, ErrTooLarge
	}
	select {
	case <-p.stop:
		return nil, ErrClosed
	default:
	}
	if p.disk.refuses(cmds) {
		return nil, ErrStorageFull
	}
	if f := p.refuses.Load(); f != nil && (*f)(cmds) {
		return nil, ErrStandby
	}
	select {
	case p.in <- r:
	default:
		return nil, ErrOverloaded
	}
	return func(ctx context.Context) ([][]byte, error) {
		select {
		case rep := <-r.done:
			return rep.results, rep.err
		case <-ctx.Done():
			// The entry may still commit; the caller cannot know.
			return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}, nil
}

func (p *proposer) run() {
	defer p.wg.Done()
	for {
		select {
		case p.slots <- struct{}{}:
		case <-p.stop:
			return
		}
		first := p.held
		p.held = nil
		if first == nil {
			select {
			case first = <-p.in:
			case <-p.stop:
				<-p.slots
				return
			}
		}
		batch, size := p.gather(first)
		// The first attempt is made here, in queue order: entries reach
		// raft in the order their requests were queued, so one client's
		// pipelined writes are applied in the order it sent them.
		var cmds []wire.Command
		for _, r := range batch {
			cmds = append(cmds, r.cmds...)
		}
		// The entry carries the node's clock; the retry deadline runs on the
		// local monotonic clock, which that clock follows within the skew.
		if !p.inFlight.take(size, p.stop) {
			for _, r := range batch {
				r.done <- reply{err: ErrClosed}
			}
			<-p.slots
			return
		}
		stamp := time.Now()
		data := wire.AppendEntry(getEntryBuf(size+32), p.nowMs(), cmds)
		rs, err := p.nh.Propose(p.session, data, p.firstAttemptTimeout())
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { <-p.slots }()
			defer p.inFlight.give(size)
			p.propose(batch, cmds, data, stamp, retryDeadline(stamp, p.requestTimeout), rs, err)
		}()
	}
}

// gather builds the next entry's requests: first, then whatever is waiting,
// until the entry reaches gatherBytes or the queue is empty. A request that
// would take the entry past entryLimit (or past the commands an entry may
// carry) is held for the next entry, which it leads, so requests keep
// their queue order.
func (p *proposer) gather(first *request) ([]*request, int) {
	batch, size, count := []*request{first}, first.size, len(first.cmds)
	for size < p.gatherBytes {
		select {
		case r := <-p.in:
			if size+r.size > p.entryLimit || count+len(r.cmds) > wire.MaxCommandsPerEntry {
				p.held = r
				return batch, size
			}
			batch = append(batch, r)
			size += r.size
			count += len(r.cmds)
		default:
			return batch, size
		}
	}
	return batch, size
}

// propose waits for an entry's first attempt and retries it until it is
// applied, a non-temporary error, or the deadline, then answers every
// request of the batch. Retrying is safe because the state machine
// recognises the attempts of one proposal in either order (see
// storage/retries.go).
func (p *proposer) propose(batch []*request, cmds []wire.Command, data []byte, stamp, deadline time.Time, first *dragonboat.RequestState, firstErr error) {
	results, err := p.proposeEntry(data, deadline, first, firstErr)
	putEntryBuf(data)
	if err == nil && p.latency != nil {
		p.latency.UpdateDuration(stamp)
	}
	if err == nil && len(results) != len(cmds) {
		err = fmt.Errorf("raftgroups: group %d answered %d results for %d commands", p.group, len(results), len(cmds))
	}
	for _, r := range batch {
		if err != nil {
			r.done <- reply{err: err}
			continue
		}
		r.done <- reply{results: results[:len(r.cmds):len(r.cmds)]}
		results = results[len(r.cmds):]
	}
}

// firstAttemptTimeout is how long the first attempt of an entry may take.
// On a follower a proposal forwarded to a leader that dies is lost without
// a word, so attempts are short and retried. On the leader the entry is in
// the leader's own log: a slow commit means the cluster is busy, and a
// retry would only add a duplicate entry to the load (measured: under a
// saturating Kafka load on three nodes, 3 s attempts turned into a retry
// storm), so it waits longer.
func (p *proposer) firstAttemptTimeout() time.Duration {
	if leader, _, ok, err := p.nh.GetLeaderID(p.shardID); err == nil && ok && leader == p.replicaID {
		return min(3*p.attemptTimeout, p.requestTimeout)
	}
	return p.attemptTimeout
}

// retryDeadline is when the attempts of an entry stamped at stamp stop: the
// request timeout, but never past wire.RetryWindowMs after the stamp, since
// the state machine recognises a retry only for a bounded time.
func retryDeadline(stamp time.Time, requestTimeout time.Duration) time.Time {
	return stamp.Add(min(requestTimeout, wire.RetryWindowMs*time.Millisecond))
}

func (p *proposer) proposeEntry(data []byte, deadline time.Time, rs *dragonboat.RequestState, err error) ([][]byte, error) {
	backoff := 5 * time.Millisecond
	proposed := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt == 1 {
				data = wire.MarkRetry(data)
			}
			timeout := min(p.attemptTimeout, time.Until(deadline))
			if timeout < 10*time.Millisecond {
				timeout = 10 * time.Millisecond
			}
			rs, err = p.nh.Propose(p.session, data, timeout)
		}
		if err == nil {
			proposed = true
			var res dragonboat.RequestResult
			select {
			case res = <-rs.ResultC():
			case <-p.stop:
				rs.Release()
				return nil, ErrClosed
			}
			rs.Release()
			switch {
			case res.Completed():
				return wire.SplitResults(res.GetResult().Data)
			case res.Rejected():
				return nil, fmt.Errorf("raftgroups: group %d rejected the proposal", p.group)
			case res.Terminated():
				return nil, ErrClosed
			}
			err = dragonboat.ErrTimeout // timed out, dropped or aborted: try again
		}
		if errors.Is(err, dragonboat.ErrPayloadTooBig) {
			return nil, ErrTooLarge
		}
		if !dragonboat.IsTempError(err) {
			return nil, fmt.Errorf("raftgroups: group %d propose: %w", p.group, err)
		}
		if time.Now().After(deadline) {
			if proposed {
				return nil, ErrOutcomeUnknown
			}
			return nil, ErrNoLeader
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-time.After(sleep):
		case <-p.stop:
			return nil, ErrClosed
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// Entry buffers are reused: dragonboat copies a proposal's bytes before
// Propose returns, so once an entry's last attempt is answered nothing
// points into its buffer. At full load allocating (and zeroing) a fresh
// multi-MiB buffer per entry was a tenth of the broker's CPU.
var entryBufs sync.Pool

// maxPooledEntry keeps one oversized entry from pinning its buffer.
const maxPooledEntry = 8 << 20

func getEntryBuf(size int) []byte {
	if b, ok := entryBufs.Get().(*[]byte); ok {
		if cap(*b) >= size {
			return (*b)[:0]
		}
		entryBufs.Put(b)
	}
	return make([]byte, 0, size)
}

func putEntryBuf(b []byte) {
	if cap(b) <= maxPooledEntry {
		b = b[:0]
		entryBufs.Put(&b)
	}
}
