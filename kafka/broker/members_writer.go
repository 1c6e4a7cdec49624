package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/kafka/broker/groups"
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
	term       uint64 // of the coordinator that enqueued it
	generation int32
	state      []byte
	seq        uint64
}

// enqueue keeps a group's newest membership for the writer. The
// coordinator calls it under its own lock, so it only records and wakes:
// a raft write here would stall every request of the coordinator. A newer
// membership replaces one not yet written, as only the newest matters.
func (cs *coordinators) enqueue(k coordKey, term uint64, group string, generation int32, state []byte) {
	mk := memberKey{k, group}
	cs.pmu.Lock()
	cs.seq++
	cs.pending[mk] = pendingMembers{term, generation, state, cs.seq}
	cs.enqueued[mk] = cs.seq
	cs.pmu.Unlock()
	select {
	case cs.kick <- struct{}{}:
	default:
	}
}

// writer writes queued memberships to the raft group of their
// coordinator until close. A write that fails is not retried: the
// membership recorded before it stays, the answers waiting on it go out
// as NOT_COORDINATOR (confirm), and the members join again. A membership enqueued by a
// coordinator that no longer leads is not written at all: its successor
// read the record already, and a late write would only leave behind a
// record its successor never knew.
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
			if leader, term, ok := cs.engine.Leader(k.coord.group); ok && leader == cs.self && term == p.term {
				ctx, cancel := context.WithTimeout(cs.ctx, writeTimeout)
				err := cs.engine.SaveGroupMembers(ctx, k.coord.group, &wire.GroupMembersCmd{
					Tenant: k.coord.tenant, Group: k.group, Generation: p.generation, State: p.state})
				cancel()
				if err != nil {
					cs.log.Warn("kafka group membership not recorded", "group", k.group, "generation", p.generation, "err", err)
				} else {
					cs.pmu.Lock()
					cs.written[k] = max(cs.written[k], p.seq)
					cs.pmu.Unlock()
				}
			}
			cs.pmu.Lock()
			if p.seq > cs.tried[k] {
				cs.tried[k] = p.seq
			}
			close(cs.wrote)
			cs.wrote = make(chan struct{})
			cs.pmu.Unlock()
		}
	}
}

// confirm is asked before a JoinGroup or SyncGroup answer that coord gave
// for group goes out. It waits until the membership coord enqueued for the
// group by then has been written (at most writeTimeout), then answers
// NOT_COORDINATOR if that write failed or did not finish (the answer
// would name a generation only this node's memory holds), or if this node
// no longer coordinates k in the term coord was built in (a leadership
// hand-off as the node stops, or a lost election). Such an answer would name a generation the next coordinator,
// which read the record when it took over, may never have heard of; told
// NOT_COORDINATOR, the client finds that coordinator and joins or syncs
// again there, where the record it holds is the truth. So a member that
// holds an answer is known to the next coordinator whenever raft could
// record it, and a coordinator change costs no rebalance.
func (cs *coordinators) confirm(ctx context.Context, k coordKey, group string, coord *groups.Coordinator) *kerr.Error {
	mk := memberKey{k, group}
	t := time.NewTimer(writeTimeout)
	defer t.Stop()
	cs.pmu.Lock()
	target := cs.enqueued[mk]
	cs.pmu.Unlock()
wait:
	for {
		cs.pmu.Lock()
		done, wrote := cs.tried[mk] >= target, cs.wrote
		cs.pmu.Unlock()
		if done {
			break
		}
		select {
		case <-wrote:
		case <-ctx.Done():
			break wait
		case <-cs.stop:
			break wait
		case <-t.C:
			break wait
		}
	}
	cs.pmu.Lock()
	recorded := cs.written[mk] >= target
	cs.pmu.Unlock()
	if !recorded {
		return kerr.NotCoordinator
	}
	leader, term, ok := cs.engine.Leader(k.group)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if tc := cs.byKey[k]; !ok || leader != cs.self || tc == nil || tc.c != coord || tc.term != term {
		return kerr.NotCoordinator
	}
	return nil
}
