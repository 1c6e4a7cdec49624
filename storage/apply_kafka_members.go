package storage

import "github.com/queen-mq/queen/wire"

// GroupMembers is a Kafka consumer group's membership as its coordinator
// last recorded it: the generation and the coordinator's own encoding of
// the members (kafka/broker/groups). The store keeps it so a coordinator
// that takes over after a leadership change continues the group instead
// of making every member rejoin.
type GroupMembers struct {
	Generation int32
	State      []byte
}

func (m GroupMembers) encode() []byte {
	w := wire.Writer{}
	w.Varint(int64(m.Generation))
	w.Bytes(m.State)
	return w.B
}

func decodeGroupMembers(b []byte) (GroupMembers, error) {
	r := wire.NewReader(b)
	m := GroupMembers{Generation: int32(r.Varint())}
	m.State = append([]byte(nil), r.Bytes()...) // the scan reuses its buffers
	return m, r.Done()
}

// applyGroupMembers records or forgets a consumer group's membership. A
// record of an older generation than the one kept is stale (two writes of
// one coordinator overtook each other, or a deposed coordinator's write
// landed late) and changes nothing; so does repeating one, so a retried
// proposal is harmless.
func (s *Store) applyGroupMembers(ctx *applyCtx, c *wire.GroupMembersCmd) wire.CodeResult {
	k := txnKeyT{c.Tenant, c.Group}
	if cur, ok := s.kafka.members[k]; ok && cur.Generation > c.Generation {
		return wire.CodeResult{Code: wire.CodeOK}
	}
	if len(c.State) == 0 {
		if _, ok := s.kafka.members[k]; ok {
			delete(s.kafka.members, k)
			ctx.del(membersKey(c.Tenant, c.Group))
		}
		return wire.CodeResult{Code: wire.CodeOK}
	}
	m := GroupMembers{Generation: c.Generation, State: c.State}
	s.kafka.members[k] = m
	ctx.set(membersKey(c.Tenant, c.Group), m.encode())
	return wire.CodeResult{Code: wire.CodeOK}
}

// GroupMembersOf returns the recorded memberships of the tenant's consumer
// groups kept in this raft group, by group name.
func (s *Store) GroupMembersOf(tenant wire.ID) map[string]GroupMembers {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]GroupMembers{}
	for k, m := range s.kafka.members {
		if k.tenant == tenant {
			out[k.id] = m
		}
	}
	return out
}
