package raftgroups

import (
	"context"
	"fmt"
	"time"
)

// PreferredLeader is the node group n should be led by (spec decision 4:
// group n on voter n mod size, the node balanceLeaders moves it to); 0
// when there are no voters or no such group.
func (e *Engine) PreferredLeader(n int) uint64 {
	if n < 0 || n >= len(e.host.groups) {
		return 0
	}
	return e.host.preferredLeader(n)
}

// ElectPreferred moves group n's leadership to its preferred node and
// waits, within ctx, until that node leads it; it returns at once when it
// already does (moved false). Any node may ask: dragonboat forwards the
// transfer request to the group's leader. The balancer would move it
// there too within seconds when the node answers; this does it now, as
// Kafka's preferred leader election does. Refused while this node runs a
// membership change, as the balancer's moves are, and while the preferred
// node looks down (ErrNoLeader).
func (e *Engine) ElectPreferred(ctx context.Context, n int) (moved bool, err error) {
	want := e.PreferredLeader(n)
	if want == 0 {
		return false, fmt.Errorf("raftgroups: group %d has no preferred leader: %w", n, ErrNoLeader)
	}
	if id, _, ok := e.Leader(n); ok && id == want {
		return false, nil
	}
	if !e.NodeLive(want) {
		// A transfer to a node that is down would only stall the group.
		return false, fmt.Errorf("raftgroups: preferred leader %d of group %d looks down: %w", want, n, ErrNoLeader)
	}
	if e.host.changing.Load() > 0 {
		return false, fmt.Errorf("raftgroups: membership change under way: %w", ErrOverloaded)
	}
	g := e.host.groups[n]
	t := time.NewTicker(20 * time.Millisecond) // dragonboat has no leadership channel
	defer t.Stop()
	asked := time.Time{}
	retry := max(e.host.ElectionTimeout(), 200*time.Millisecond)
	for {
		id, _, ok := e.Leader(n)
		if ok && id == want {
			return true, nil
		}
		// Asked again after an election timeout: a request sent while the
		// group had no leader, or lost on the way, is dropped silently.
		if ok && time.Since(asked) >= retry {
			if err := g.nh.RequestLeaderTransfer(g.shardID, want); err != nil {
				return false, fmt.Errorf("raftgroups: leader transfer of group %d to %d: %w", n, want, err)
			}
			asked = time.Now()
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("raftgroups: group %d not led by %d yet: %w", n, want, ctx.Err())
		case <-e.host.stop:
			return false, ErrClosed
		case <-t.C:
		}
	}
}
