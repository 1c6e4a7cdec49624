package storage

import "github.com/queen-mq/queen/wire"

// Views the Kafka facade's per-tenant caps count (kafka/broker
// tenant_caps.go): reads of this replica, so every node counts what the
// log committed, whichever node a client asks.

// AddGroupNames adds to seen the tenant's consumer groups this raft group
// knows of: those subscribed to one of its queues and those whose Kafka
// membership it records. The queue-mode group is none.
func (s *Store) AddGroupNames(tenant wire.ID, seen map[string]struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, q := range s.queuesByID {
		if q.tenant != tenant {
			continue
		}
		for g := range q.subs {
			if g != wire.QueueModeGroup {
				seen[g] = struct{}{}
			}
		}
	}
	for k := range s.kafka.members {
		if k.tenant == tenant {
			seen[k.id] = struct{}{}
		}
	}
}

// KafkaTxnIDs counts the tenant's transactional ids whose state this raft
// group holds, and reports whether id is one of them.
func (s *Store) KafkaTxnIDs(tenant wire.ID, id string) (n int, has bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k := range s.kafka.txns {
		if k.tenant == tenant {
			n++
		}
	}
	_, has = s.kafka.txns[txnKeyT{tenant, id}]
	return n, has
}
