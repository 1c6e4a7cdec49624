// Package cluster tests what a cluster of real nodes guarantees: placement
// of partitions and group leaders over the nodes and raft groups, no
// acknowledged message lost to a SIGKILL or a SIGTERM, each group on its
// raft port and a node with the wrong raft token refused, KV
// linearizability across a node kill, read-your-writes through nodes whose
// replicas trail, a replicated clock that skewed node clocks do not move,
// and partitions kept out of memory and loaded back after a restart.
//
// Operating a cluster (membership changes, rolling restarts, TLS between
// nodes, calls between nodes) is e2e/ops; injected faults (network cuts,
// full and corrupted disks, fault rounds) are e2e/faults. Shared helpers
// are in e2e/e2etest.
package cluster
