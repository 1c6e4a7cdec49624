package raftgroups

import (
	"os"
	"syscall"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/storage"
)

// Fault points a test can crash this process at (Config.CrashAt), each
// between two steps of a cross-group commit run by this node.
const (
	FaultAfterPrepare = "xtxn-after-prepare" // every participant prepared, nothing decided
	FaultAfterDecide  = "xtxn-after-decide"  // the decision recorded, no participant resolved
	FaultAfterResolve = "xtxn-after-resolve" // one participant resolved, the others not
)

// crashAt kills this process, as a power cut would, when the configured
// fault point is reached.
func (h *Host) crashAt(point string) {
	if h.cfg.CrashAt != "" && h.cfg.CrashAt == point {
		h.log.Warn("fault: crashing at a configured fault point", "point", point)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// heldStore is a group's store behind the Config.BeforeApply test hook.
type heldStore struct {
	*storage.Store
	before func()
}

func (s heldStore) Update(ents []sm.Entry) ([]sm.Entry, error) {
	s.before()
	return s.Store.Update(ents)
}
