package raftgroups

import "errors"

// Errors the engine returns for a write that did not go through. The front
// doors map each to one HTTP status and one Kafka error code, in one place
// each (http/api/errors.go, kafka/errors.go).
var (
	// ErrOverloaded: the group's queue of pending requests is full; the
	// request was not proposed. Retry later.
	ErrOverloaded = errors.New("raftgroups: overloaded")
	// ErrNoLeader: no leader could be reached before the deadline and the
	// request was never appended to the raft log.
	ErrNoLeader = errors.New("raftgroups: no leader reachable")
	// ErrOutcomeUnknown: the request was proposed but its commit was not
	// confirmed before the deadline; it may or may not have been applied.
	ErrOutcomeUnknown = errors.New("raftgroups: outcome unknown")
	// ErrTooLarge: the command exceeds QUEEN_RAFT_ENTRY_MAX_BYTES.
	ErrTooLarge = errors.New("raftgroups: command too large")
	// ErrStorageFull: the data dir's disk is above QUEEN_RAFT_DISK_HIGH_PCT
	// and the command would add data; nothing was proposed.
	ErrStorageFull = errors.New("raftgroups: storage full")
	// ErrStandby: this node's cluster is a standby following a source
	// (QUEEN_STANDBY_OF) and takes no writes until it is promoted;
	// nothing was proposed.
	ErrStandby = errors.New("raftgroups: this cluster is a standby following its source: writes are refused until it is promoted")
	// ErrNotStandby: a promotion asked of a cluster that follows no
	// source.
	ErrNotStandby = errors.New("raftgroups: this cluster is not a standby")
	// ErrClosed: the node is shutting down.
	ErrClosed = errors.New("raftgroups: shutting down")
)
