// Package tenancy owns who a request belongs to and where a tenant's data
// lives: the tenant id a request is scoped by, and the rules placing a
// tenant's queues, partitions, coordinators and KV on raft groups (spec
// decision 4, docs/placement.md). It never reads or writes that state
// itself.
package tenancy

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/queen-mq/queen/wire"
)

// Placement maps a tenant's state to raft groups. A tenant may use every
// group, or the ones QUEEN_TENANT_GROUPS pins it to. Within them:
//   - a queue's home (its catalog and directory) is the group its name
//     hashes to, and its partitions go round-robin from there, so one
//     topic's partitions cover every group (wire.Placement);
//   - a Kafka consumer group or transactional id is coordinated by the
//     group its id hashes to;
//   - the tenant's KV and locks live in the group the tenant hashes to.
//
// The hashes must never change: data already placed depends on them.
type Placement struct {
	groups int
	all    []uint16
	fixed  map[wire.ID][]uint16
}

// NewPlacement parses QUEEN_TENANT_GROUPS ("<tenant uuid>=<group>[|<group>...],...").
func NewPlacement(groups int, spec string) (Placement, error) {
	if groups < 1 || groups > wire.MaxGroups {
		return Placement{}, fmt.Errorf("tenancy: %d raft groups", groups)
	}
	p := Placement{groups: groups, fixed: map[wire.ID][]uint16{}}
	for g := 0; g < groups; g++ {
		p.all = append(p.all, uint16(g))
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		tenant, list, ok := strings.Cut(item, "=")
		if !ok {
			return Placement{}, fmt.Errorf("QUEEN_TENANT_GROUPS: %q is not <tenant>=<group>[|<group>...]", item)
		}
		id, err := wire.ParseID(strings.TrimSpace(tenant))
		if err != nil {
			return Placement{}, fmt.Errorf("QUEEN_TENANT_GROUPS: tenant %q: %w", tenant, err)
		}
		var set []uint16
		for _, group := range strings.Split(list, "|") {
			g, err := strconv.Atoi(strings.TrimSpace(group))
			if err != nil || g < 0 || g >= groups {
				return Placement{}, fmt.Errorf("QUEEN_TENANT_GROUPS: group %q is not in 0..%d", group, groups-1)
			}
			if !slices.Contains(set, uint16(g)) {
				set = append(set, uint16(g))
			}
		}
		slices.Sort(set)
		p.fixed[id] = set
	}
	return p, nil
}

// Groups is the number of raft groups.
func (p Placement) Groups() int { return p.groups }

// TenantGroups lists the groups a tenant's data may use, ascending.
func (p Placement) TenantGroups(tenant wire.ID) []uint16 {
	if set, ok := p.fixed[tenant]; ok {
		return set
	}
	return p.all
}

func hash(tenant wire.ID, kind byte, name string) uint64 {
	h := fnv.New64a()
	h.Write(tenant[:])
	h.Write([]byte{kind})
	h.Write([]byte(name))
	return h.Sum64()
}

// Queue is where a queue of tenant goes: its tenant's groups, starting at
// the one its name hashes to.
func (p Placement) Queue(tenant wire.ID, queue string) wire.Placement {
	set := p.TenantGroups(tenant)
	return wire.Placement{Groups: set, Start: uint32(hash(tenant, 'q', queue) % uint64(len(set)))}
}

// Home is the group holding a queue's catalog (and its timers).
func (p Placement) Home(tenant wire.ID, queue string) int {
	pl := p.Queue(tenant, queue)
	return pl.Home()
}

// Coordinator is the group whose leader coordinates a Kafka consumer group
// or transactional id (kind 'g' or 't'), as Kafka hashes them onto its
// internal topics' partitions.
func (p Placement) Coordinator(tenant wire.ID, kind byte, id string) int {
	set := p.TenantGroups(tenant)
	return int(set[hash(tenant, kind, id)%uint64(len(set))])
}

// TenantHome is the group holding the tenant's KV and locks, so a KV batch
// over many keys commits in one group.
func (p Placement) TenantHome(tenant wire.ID) int {
	set := p.TenantGroups(tenant)
	return int(set[hash(tenant, 'k', "")%uint64(len(set))])
}

// Spec is the placement as one line, recorded in the data directory so a
// node started later with other settings is refused rather than looking
// for data where it is not.
func (p Placement) Spec() string {
	var b strings.Builder
	fmt.Fprintf(&b, "groups=%d", p.groups)
	tenants := make([]wire.ID, 0, len(p.fixed))
	for t := range p.fixed {
		tenants = append(tenants, t)
	}
	slices.SortFunc(tenants, func(a, b wire.ID) int { return strings.Compare(a.String(), b.String()) })
	for _, t := range tenants {
		gs := make([]string, len(p.fixed[t]))
		for i, g := range p.fixed[t] {
			gs[i] = strconv.Itoa(int(g))
		}
		fmt.Fprintf(&b, " %s=%s", t, strings.Join(gs, "|"))
	}
	return b.String()
}
