package broker

import (
	"context"
	"time"

	"github.com/queen-mq/queen/wire"
)

// restoreTimeout bounds the barrier a new coordinator reads recorded
// memberships behind; the client retries after COORDINATOR_LOAD_IN_PROGRESS.
const restoreTimeout = 3 * time.Second

// writeTimeout bounds one membership write.
const writeTimeout = 5 * time.Second

// memberKey names one consumer group of one coordinator.
type memberKey struct {
	coord coordKey
	group string
}

type pendingMembers struct {
	generation int32
	state      []byte
}

// enqueue keeps a group's newest membership for the writer. The
// coordinator calls it under its own lock, so it only records and wakes:
// a raft write here would stall every request of the coordinator. A newer
// membership replaces one not yet written, as only the newest matters.
func (cs *coordinators) enqueue(k coordKey, group string, generation int32, state []byte) {
	cs.pmu.Lock()
	cs.pending[memberKey{k, group}] = pendingMembers{generation, state}
	cs.pmu.Unlock()
	select {
	case cs.kick <- struct{}{}:
	default:
	}
}

// writer writes queued memberships to the raft group of their
// coordinator until close. A write that fails is not retried: the
// membership recorded before it stays, and a coordinator restoring that
// older generation makes the members rejoin, which is what happened
// before memberships were recorded at all. Membership answers are never
// delayed by the write: it records coordination state, not client data.
func (cs *coordinators) writer() {
	defer cs.wg.Done()
	for {
		select {
		case <-cs.stop:
			return
		case <-cs.kick:
		}
		cs.pmu.Lock()
		batch := cs.pending
		cs.pending = map[memberKey]pendingMembers{}
		cs.pmu.Unlock()
		for k, p := range batch {
			ctx, cancel := context.WithTimeout(cs.ctx, writeTimeout)
			err := cs.engine.SaveGroupMembers(ctx, k.coord.group, &wire.GroupMembersCmd{
				Tenant: k.coord.tenant, Group: k.group, Generation: p.generation, State: p.state})
			cancel()
			if err != nil {
				cs.log.Warn("kafka group membership not recorded", "group", k.group, "generation", p.generation, "err", err)
			}
			cs.pmu.Lock()
			if p.generation > cs.written[k] {
				cs.written[k] = p.generation
			}
			close(cs.wrote)
			cs.wrote = make(chan struct{})
			cs.pmu.Unlock()
		}
	}
}

// awaitRecorded waits until the write of group's membership at generation
// (or a later one) has been tried, at most writeTimeout. SyncGroup answers
// after it, so a member that holds its assignment is known to the next
// coordinator whenever raft could record it: a coordinator change right
// after a rebalance then costs no second one.
func (cs *coordinators) awaitRecorded(ctx context.Context, k coordKey, group string, generation int32) {
	t := time.NewTimer(writeTimeout)
	defer t.Stop()
	for {
		cs.pmu.Lock()
		done, wrote := cs.written[memberKey{k, group}] >= generation, cs.wrote
		cs.pmu.Unlock()
		if done {
			return
		}
		select {
		case <-wrote:
		case <-ctx.Done():
			return
		case <-cs.stop:
			return
		case <-t.C:
			return
		}
	}
}
