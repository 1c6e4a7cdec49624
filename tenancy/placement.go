// Package tenancy owns who a request belongs to and where that tenant's data
// lives: the tenant id a request is scoped by, and the raft group that holds
// all of a tenant's state (spec decision 4). It never reads or writes that
// state itself.
package tenancy

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/queen-mq/queen/wire"
)

// Placement maps tenants to raft groups: an explicit assignment from
// QUEEN_TENANT_GROUPS, otherwise a stable hash of the tenant id over the
// group count. Everything a transaction can touch belongs to one tenant, so
// it is always in one group and commits as one raft entry.
type Placement struct {
	groups int
	fixed  map[wire.ID]int
}

// NewPlacement parses QUEEN_TENANT_GROUPS ("<tenant uuid>=<group>,...").
func NewPlacement(groups int, spec string) (Placement, error) {
	if groups < 1 {
		return Placement{}, fmt.Errorf("tenancy: %d raft groups", groups)
	}
	p := Placement{groups: groups, fixed: map[wire.ID]int{}}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		tenant, group, ok := strings.Cut(item, "=")
		if !ok {
			return Placement{}, fmt.Errorf("QUEEN_TENANT_GROUPS: %q is not <tenant>=<group>", item)
		}
		id, err := wire.ParseID(strings.TrimSpace(tenant))
		if err != nil {
			return Placement{}, fmt.Errorf("QUEEN_TENANT_GROUPS: tenant %q: %w", tenant, err)
		}
		g, err := strconv.Atoi(strings.TrimSpace(group))
		if err != nil || g < 0 || g >= groups {
			return Placement{}, fmt.Errorf("QUEEN_TENANT_GROUPS: group %q is not in 0..%d", group, groups-1)
		}
		p.fixed[id] = g
	}
	return p, nil
}

// Groups is the number of raft groups.
func (p Placement) Groups() int { return p.groups }

// GroupOf returns the raft group holding tenant's data.
func (p Placement) GroupOf(tenant wire.ID) int {
	if g, ok := p.fixed[tenant]; ok {
		return g
	}
	if p.groups == 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write(tenant[:])
	return int(h.Sum64() % uint64(p.groups))
}
