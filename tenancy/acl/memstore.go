package acl

import (
	"context"
	"sync"
)

// MemStore is a Store in memory, for tests and single-process tools: the
// replicated one is raftgroups' ACLStore.
type MemStore struct {
	mu  sync.Mutex
	gen uint64
	all map[string]map[Binding]bool
}

// NewMemStore is an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{all: map[string]map[Binding]bool{}} }

// Generation implements Store.
func (m *MemStore) Generation(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen, nil
}

// Load implements Store.
func (m *MemStore) Load(context.Context) (uint64, map[string][]Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]Binding, len(m.all))
	for t, set := range m.all {
		for b := range set {
			out[t] = append(out[t], b)
		}
	}
	return m.gen, out, nil
}

// Change implements Store.
func (m *MemStore) Change(_ context.Context, tenant string, add, remove []Binding) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.all[tenant]
	if set == nil {
		set = map[Binding]bool{}
		m.all[tenant] = set
	}
	for _, b := range add {
		set[b] = true
	}
	for _, b := range remove {
		delete(set, b)
	}
	m.gen++
	return nil
}
