package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/harness"
)

// GroupHealth is one raft group as a node's /health lists it.
type GroupHealth struct {
	Group  int    `json:"group"`
	Leader uint64 `json:"leader"`
	Term   uint64 `json:"term"`
	Role   string `json:"role"`
}

// GroupsOf reads a healthy node's /health: every group with its leader.
func GroupsOf(ctx context.Context, n *harness.Node) ([]GroupHealth, error) {
	groups, code, err := HealthGroups(ctx, n)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("health %d", code)
	}
	return groups, nil
}

// HealthGroups reads the groups of a node's /health, healthy (200) or
// settling (503), and the status.
func HealthGroups(ctx context.Context, n *harness.Node) ([]GroupHealth, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/health", nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Groups []GroupHealth `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("health %d: %w", resp.StatusCode, err)
	}
	return h.Groups, resp.StatusCode, nil
}

// GroupLeader waits until group g has a leader and returns the index of the
// node leading it.
func GroupLeader(t *testing.T, ctx context.Context, c *harness.Cluster, g int) int {
	t.Helper()
	leader := -1
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			groups, err := GroupsOf(ctx, n)
			if err != nil {
				continue
			}
			for _, gh := range groups {
				if gh.Group != g || gh.Leader == 0 {
					continue
				}
				for i, m := range c.Nodes {
					if uint64(m.ID) == gh.Leader && m.Running() {
						leader = i
						return true, nil
					}
				}
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("group %d has no leader: %v", g, err)
	}
	return leader
}

// GroupOfPID is the raft group a partition id names (its low 8 bits).
func GroupOfPID(t *testing.T, pid string) int {
	t.Helper()
	n, err := strconv.ParseUint(pid, 10, 64)
	if err != nil {
		t.Fatalf("partition id %q: %v", pid, err)
	}
	return int(n & 0xff)
}

// QueuePartitions lists a queue's partitions with their ids, from the
// queue detail view.
func QueuePartitions(t *testing.T, ctx context.Context, base, queue string) map[string]string {
	t.Helper()
	var detail struct {
		Partitions []struct {
			Name string `json:"name"`
			ID   string `json:"id"`
		} `json:"partitions"`
	}
	GetJSON(t, ctx, http.MethodGet, base+"/api/v1/resources/queues/"+queue, nil, http.StatusOK, &detail)
	out := map[string]string{}
	for _, p := range detail.Partitions {
		out[p.Name] = p.ID
	}
	return out
}

// PlacementInfo is /api/v1/system/placement: every group with its leader,
// the KV group and, when asked, where a queue's partitions live.
type PlacementInfo struct {
	Groups []struct {
		Group  int    `json:"group"`
		Leader uint64 `json:"leader"`
	} `json:"groups"`
	KVGroup int `json:"kvGroup"`
	Queue   *struct {
		Home       int `json:"home"`
		Partitions []struct {
			Name   string `json:"name"`
			Index  uint32 `json:"index"`
			Group  int    `json:"group"`
			Leader uint64 `json:"leader"`
		} `json:"partitions"`
	} `json:"queue"`
}

// PlacementOf reads where the default tenant's data (and a queue's) lives.
func PlacementOf(ctx context.Context, t *testing.T, base, queue string) PlacementInfo {
	t.Helper()
	var p PlacementInfo
	url := base + "/api/v1/system/placement"
	if queue != "" {
		url += "?queue=" + queue
	}
	GetJSON(t, ctx, http.MethodGet, url, nil, http.StatusOK, &p)
	return p
}

// FirstPartitionGroup waits until the node at base lists the queue's
// partition 0 (a topic created through another node reaches it when it
// applies the creation) and returns its raft group.
func FirstPartitionGroup(ctx context.Context, t *testing.T, base, queue string) int {
	t.Helper()
	var group int
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		p := PlacementOf(ctx, t, base, queue)
		if len(p.Queue.Partitions) == 0 {
			return false, nil
		}
		group = p.Queue.Partitions[0].Group
		return true, nil
	}); err != nil {
		t.Fatalf("%s has no partition 0 at %s: %v", queue, base, err)
	}
	return group
}
