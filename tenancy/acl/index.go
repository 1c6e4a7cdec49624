package acl

import (
	"slices"
	"sort"
	"strings"
)

// The in-memory index a decision reads. It is immutable once built: a
// refresh builds a new one and swaps a pointer, so Allowed takes no lock.
// Per tenant and resource type, bindings are found by name (literal map,
// with the wildcard "*" one of its keys) and by prefix (a map keyed by the
// prefix, probed once per distinct prefix length), then by principal (the
// request's and User:*). A decision is a handful of map lookups whatever
// the number of bindings.

// ace is one binding's access control entry, under its resource pattern
// and principal.
type ace struct {
	host string
	op   Operation
	perm Permission
}

// byPrincipal holds one resource pattern's entries by principal.
type byPrincipal map[string][]ace

type resIndex struct {
	literal  map[string]byPrincipal
	prefixed map[string]byPrincipal
	// lens are the distinct lengths of prefixed's keys, ascending.
	lens []int
}

type tenantIndex struct {
	res [ResourceTransactionalID + 1]*resIndex
	// bindings is the tenant's bindings in a stable order, for Describe.
	bindings []Binding
}

type index struct {
	// gen is the store's generation the index was built from; loaded is
	// false until the first load.
	gen     uint64
	loaded  bool
	tenants map[string]*tenantIndex
}

func buildIndex(gen uint64, all map[string][]Binding) *index {
	ix := &index{gen: gen, tenants: make(map[string]*tenantIndex, len(all))}
	for tenant, bs := range all {
		t := &tenantIndex{}
		seen := make(map[Binding]bool, len(bs))
		for _, b := range bs {
			if Validate(b) != nil || seen[b] {
				continue // written by a newer node or twice: never trusted half-understood
			}
			seen[b] = true
			t.bindings = append(t.bindings, b)
			r := t.res[b.Resource]
			if r == nil {
				r = &resIndex{literal: map[string]byPrincipal{}, prefixed: map[string]byPrincipal{}}
				t.res[b.Resource] = r
			}
			m := r.literal
			if b.Pattern == PatternPrefixed {
				m = r.prefixed
				if !slices.Contains(r.lens, len(b.Name)) {
					r.lens = append(r.lens, len(b.Name))
				}
			}
			bp := m[b.Name]
			if bp == nil {
				bp = byPrincipal{}
				m[b.Name] = bp
			}
			bp[b.Principal] = append(bp[b.Principal], ace{host: b.Host, op: b.Op, perm: b.Perm})
		}
		if len(t.bindings) == 0 {
			continue
		}
		for _, r := range t.res {
			if r != nil {
				sort.Ints(r.lens)
			}
		}
		sortBindings(t.bindings)
		ix.tenants[tenant] = t
	}
	return ix
}

func sortBindings(bs []Binding) {
	slices.SortFunc(bs, func(a, b Binding) int {
		switch {
		case a.Resource != b.Resource:
			return int(a.Resource) - int(b.Resource)
		case a.Pattern != b.Pattern:
			return int(a.Pattern) - int(b.Pattern)
		case a.Name != b.Name:
			return strings.Compare(a.Name, b.Name)
		case a.Principal != b.Principal:
			return strings.Compare(a.Principal, b.Principal)
		case a.Host != b.Host:
			return strings.Compare(a.Host, b.Host)
		case a.Op != b.Op:
			return int(a.Op) - int(b.Op)
		}
		return int(a.Perm) - int(b.Perm)
	})
}

// verdict accumulates what the matching entries say.
type verdict struct {
	deny, allow bool
}

// implies says whether an ALLOW of op grants want, as Kafka's
// AclAuthorizer: ALL grants everything; DESCRIBE is granted by READ,
// WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.
func implies(op, want Operation) bool {
	if op == want || op == OpAll {
		return true
	}
	switch want {
	case OpDescribe:
		return op == OpRead || op == OpWrite || op == OpDelete || op == OpAlter
	case OpDescribeConfigs:
		return op == OpAlterConfigs
	}
	return false
}

func (v *verdict) add(aces []ace, host string, want Operation) {
	for _, a := range aces {
		if a.host != host && a.host != WildcardHost {
			continue
		}
		switch a.perm {
		case PermDeny:
			// A DENY names the operation it denies (or ALL): it does
			// not deny the operations its operation would imply.
			if a.op == want || a.op == OpAll {
				v.deny = true
			}
		case PermAllow:
			if implies(a.op, want) {
				v.allow = true
			}
		}
	}
}

func (v *verdict) addPattern(bp byPrincipal, r Request) {
	if bp == nil {
		return
	}
	v.add(bp[r.Principal], r.Host, r.Op)
	if r.Principal != WildcardPrincipal {
		v.add(bp[WildcardPrincipal], r.Host, r.Op)
	}
}

// decide is Kafka's AclAuthorizer.authorize for one request, super users
// aside: a matching DENY wins, else a matching ALLOW grants, else denied.
func (ix *index) decide(r Request) bool {
	t := ix.tenants[r.Tenant]
	if t == nil || r.Resource < ResourceTopic || r.Resource > ResourceTransactionalID {
		return false
	}
	res := t.res[r.Resource]
	if res == nil {
		return false
	}
	var v verdict
	v.addPattern(res.literal[r.Name], r)
	if r.Name != WildcardName {
		v.addPattern(res.literal[WildcardName], r)
	}
	for _, n := range res.lens {
		if n > len(r.Name) {
			break
		}
		v.addPattern(res.prefixed[r.Name[:n]], r)
		if v.deny {
			break
		}
	}
	return v.allow && !v.deny
}

// describe is the tenant's bindings f matches.
func (ix *index) describe(tenant string, f Filter) []Binding {
	t := ix.tenants[tenant]
	if t == nil {
		return nil
	}
	var out []Binding
	for _, b := range t.bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

func (ix *index) count(tenant string) int {
	if t := ix.tenants[tenant]; t != nil {
		return len(t.bindings)
	}
	return 0
}

// anyAllowed is Kafka's authorizeByResourceType: whether some ALLOW
// binding of r's principal (or User:*) and host for r.Op (or ALL) on a
// resource of type rt is not overridden by a DENY covering everything it
// names. It scans the tenant's bindings of that type: it answers rare
// requests (an idempotent producer's InitProducerId), never a hot path.
func (ix *index) anyAllowed(r Request, rt ResourceType) bool {
	t := ix.tenants[r.Tenant]
	if t == nil || rt < ResourceTopic || rt > ResourceTransactionalID || t.res[rt] == nil {
		return false
	}
	res := t.res[rt]
	allows := func(bp byPrincipal) bool {
		for _, p := range []string{r.Principal, WildcardPrincipal} {
			for _, a := range bp[p] {
				if a.perm == PermAllow && (a.op == r.Op || a.op == OpAll) && (a.host == r.Host || a.host == WildcardHost) {
					return true
				}
			}
		}
		return false
	}
	denies := func(bp byPrincipal) bool {
		var v verdict
		v.addPattern(bp, r)
		return v.deny
	}
	// A DENY of the wildcard or of a prefix of the name covers it.
	coveredByDeny := func(name string) bool {
		if denies(res.literal[WildcardName]) {
			return true
		}
		for _, n := range res.lens {
			if n > len(name) {
				break
			}
			if denies(res.prefixed[name[:n]]) {
				return true
			}
		}
		return false
	}
	for name, bp := range res.literal {
		if allows(bp) && !denies(bp) && !coveredByDeny(name) {
			return true
		}
	}
	for name, bp := range res.prefixed {
		if allows(bp) && !coveredByDeny(name) {
			return true
		}
	}
	return false
}
