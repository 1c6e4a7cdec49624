package harness

import (
	"fmt"
)

// AddNode allocates a new node (the next id, fresh ports and an empty
// data dir under baseDir) that joins the running cluster: it lists only
// itself in QUEEN_RAFT_PEERS and starts with QUEEN_RAFT_JOIN=true, so it
// waits to be added as a learner. groups must match the cluster's
// QUEEN_RAFT_GROUPS. The node is not started.
func (c *Cluster) AddNode(baseDir string, groups int, env map[string]string) (*Node, error) {
	var bin string
	for _, n := range c.Nodes {
		bin = n.bin
	}
	c.lastID++
	id := c.lastID
	n, err := newNode(id, bin, baseDir, max(groups, 1))
	if err != nil {
		return nil, err
	}
	for k, v := range env {
		n.Env[k] = v
	}
	n.Env["QUEEN_RAFT_GROUPS"] = fmt.Sprint(max(groups, 1))
	n.Env["QUEEN_RAFT_JOIN"] = "true"
	// Listed after the cluster's QUEEN_RAFT_PEERS in the environment, so it
	// wins: the joiner knows only itself.
	n.Env["QUEEN_RAFT_PEERS"] = fmt.Sprintf("%d=%s/%s", id, n.RaftAddr, n.HTTPAddr)
	c.Nodes = append(c.Nodes, n)
	return n, nil
}

// Remove drops a node from the cluster's list (after its process stopped),
// so WaitAllHealthy and StopAll no longer count it.
func (c *Cluster) Remove(n *Node) {
	for i, m := range c.Nodes {
		if m == n {
			c.Nodes = append(c.Nodes[:i], c.Nodes[i+1:]...)
			return
		}
	}
}
