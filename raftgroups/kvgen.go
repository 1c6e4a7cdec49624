package raftgroups

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/queen-mq/queen/wire"
)

// KVGeneration is a change counter kept in the default tenant's KV beside
// the data whose changes it counts (the ACL bindings, the Kafka facade's
// client quotas). Every change carries Bump in its own KV command, so the
// counter and the data move in one raft entry: a node that reads the
// counter unchanged knows the data is unchanged, and reloads only when it
// moved. Plain KV operations every format applies: no new entry kind, no
// format gate.
type KVGeneration struct {
	e   *Engine
	ns  string
	key []byte
}

// KVGeneration is the counter at key in the default tenant's namespace
// ns. The key must not be one the data uses.
func (e *Engine) KVGeneration(ns, key string) KVGeneration {
	return KVGeneration{e: e, ns: ns, key: []byte(key)}
}

// Bump is the operation a change adds to its command: the counter plus
// one, required, so the change and the bump commit together or not at all.
func (g KVGeneration) Bump() wire.KVOp {
	return wire.KVOp{Op: wire.KVIncr, NS: g.ns, Key: g.key, Delta: 1, Required: true}
}

// Key is the counter's key, which a reader of the namespace skips.
func (g KVGeneration) Key() string { return string(g.key) }

// Local is the counter on this node's replica (0 before any change): one
// key read, no raft round trip, as current as this replica's applied
// entries.
func (g KVGeneration) Local() (uint64, error) {
	it, found, err := g.e.KVStore(wire.DefaultTenant).KVGet(wire.DefaultTenant, g.ns, g.key)
	if err != nil || !found {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(it.Value)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s generation %q: %w", g.ns, it.Value, err)
	}
	return n, nil
}
