package raftgroups

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/queen-mq/queen/wire"
)

// A stepped command (wire.Steps: a seek of a whole queue, a group delete)
// walks every partition of its queues in raft entries of a bounded number
// of partitions. Once started, a walk runs to its end in a goroutine the
// host owns, whatever becomes of the request that started it: a caller
// whose deadline passes gets a timeout and the walk goes on, as the single
// entry these commands used to be went on applying. A request identical to
// a walk in progress waits for that walk instead of starting another.

// stepsWalkLimit bounds one walk, so a walk that cannot progress (no
// quorum) ends: the longest statement timeout QUEEN_STMT_TIMEOUT_MS takes.
const stepsWalkLimit = 10 * time.Minute

// stepRetryWait is how long a walk waits before it proposes again a step
// that stopped where it started (a cursor pinned by a prepared
// transaction, resolved within seconds).
const stepRetryWait = 100 * time.Millisecond

// stepWalks are the walks in progress on this node, by command.
type stepWalks struct {
	mu      sync.Mutex
	running map[string]*stepWalk
}

// stepWalk is one walk; res and err are set before done is closed.
type stepWalk struct {
	done chan struct{}
	res  wire.CountResult
	err  error
}

// fanOutSteps runs a stepped command in every group scope lists, each
// group's entries one after another, the groups side by side, and sums
// what they report; encode makes the command's body for one step. scope
// runs in the walk, not before it: listing the groups may wait on a
// catch-up (catchup.go), and that wait belongs to the walk, which a
// caller that leaves does not stop and a second caller joins.
func (e *Engine) fanOutSteps(ctx context.Context, scope func(context.Context) ([]int, error), kind wire.Kind, encode func(wire.Steps) []byte) (wire.CountResult, error) {
	key := string(append([]byte{byte(kind)}, encode(wire.Steps{})...))
	e.walks.mu.Lock()
	w := e.walks.running[key]
	if w == nil {
		w = &stepWalk{done: make(chan struct{})}
		started := e.host.goOwned(func() {
			w.res, w.err = e.walk(scope, kind, encode)
			e.walks.mu.Lock()
			delete(e.walks.running, key)
			e.walks.mu.Unlock()
			close(w.done)
		})
		if !started {
			e.walks.mu.Unlock()
			return wire.CountResult{}, ErrClosed
		}
		e.walks.running[key] = w
	}
	e.walks.mu.Unlock()
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		return wire.CountResult{}, fmt.Errorf("raftgroups: %w (the walk goes on; the same request again waits for it)", ctx.Err())
	}
}

// walk lists its groups, then proposes the steps of each group until every
// group's walk is done. A step that fails ends its group's walk; the steps
// applied before it stay applied (a seek or a group delete sent again
// gives the same state).
func (e *Engine) walk(scope func(context.Context) ([]int, error), kind wire.Kind, encode func(wire.Steps) []byte) (wire.CountResult, error) {
	ctx, cancel := context.WithTimeout(e.host.stopped, stepsWalkLimit)
	defer cancel()
	groups, err := scope(ctx)
	if err != nil {
		return wire.CountResult{}, err
	}
	return e.fanOutCounts(ctx, groups, func(g int) (wire.CountResult, error) {
		sum := wire.CountResult{Code: wire.CodeOK}
		steps := wire.Steps{Limit: wire.GroupStepLimit}
		for {
			r, err := proposeOne(ctx, e, g, kind, encode(steps), wire.DecodeCountResult)
			if err != nil {
				return wire.CountResult{}, err
			}
			if r.Code != wire.CodeOK {
				return r, nil
			}
			sum.N += r.N
			if !r.More {
				return sum, nil
			}
			if r.Next == steps {
				// No progress: the step stopped where it started, at a
				// cursor a prepared transaction pins. Wait for its
				// resolve (seconds at most) rather than spin.
				select {
				case <-ctx.Done():
					return wire.CountResult{}, ctx.Err()
				case <-time.After(stepRetryWait):
				}
			}
			steps = r.Next
		}
	})
}
