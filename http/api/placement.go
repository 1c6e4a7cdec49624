package api

import (
	"net/http"

	"github.com/valyala/fasthttp"
)

// placementAnswer says where the tenant's data lives (docs/placement.md):
// its groups and their leaders, the group holding its KV and locks, and,
// for a queue, its home and each partition's group.
type placementAnswer struct {
	Groups  []groupPlacement `json:"groups"`
	KVGroup int              `json:"kvGroup"`
	Queue   *queuePlacement  `json:"queue,omitempty"`
}

type groupPlacement struct {
	Group  int    `json:"group"`
	Leader uint64 `json:"leader"` // node id, 0 during an election
}

type queuePlacement struct {
	Name       string               `json:"name"`
	Home       int                  `json:"home"`
	Partitions []partitionPlacement `json:"partitions"`
}

type partitionPlacement struct {
	Name   string `json:"name"`
	Index  uint32 `json:"index"`
	Group  int    `json:"group"`
	Leader uint64 `json:"leader"`
}

// maxPlacementPartitions bounds the partitions one answer lists.
const maxPlacementPartitions = 10000

// placement is GET /api/v1/system/placement[?queue=]: for operators and
// tests, where a tenant's (and a queue's) data and leaders are.
func (s *Server) placement(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	if _, err := s.view(tenant); err != nil { // a queue created through another node is listed
		return err
	}
	leader := func(g int) uint64 { id, _, _ := s.engine.Leader(g); return id }
	ans := placementAnswer{KVGroup: s.engine.KVGroup(tenant)}
	for _, g := range s.engine.TenantGroups(tenant) {
		ans.Groups = append(ans.Groups, groupPlacement{Group: g, Leader: leader(g)})
	}
	if q := strArg(ctx, "queue"); q != "" {
		if err := checkName("queue", q); err != nil {
			return err
		}
		qp := &queuePlacement{Name: q, Home: s.engine.Home(tenant, q), Partitions: []partitionPlacement{}}
		for _, d := range s.engine.Dir(tenant, q, 0, maxPlacementPartitions) {
			qp.Partitions = append(qp.Partitions, partitionPlacement{Name: d.Name, Index: d.Index, Group: int(d.Group), Leader: leader(int(d.Group))})
		}
		ans.Queue = qp
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}
