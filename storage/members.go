package storage

import (
	"net"

	"github.com/queen-mq/queen/wire"
)

// applyRegisterMember records (or, with an empty address, forgets) where a
// raft member's HTTP door is. It lives beside the Kafka node registry in
// group 0 because both describe nodes, not data.
func (s *Store) applyRegisterMember(ctx *applyCtx, c *wire.RegisterMemberCmd) wire.CodeResult {
	if c.NodeID == 0 {
		return wire.CodeResult{Code: wire.CodeBadRequest}
	}
	if c.HTTPAddr == "" {
		if _, ok := s.kafka.memberAddrs[c.NodeID]; ok {
			delete(s.kafka.memberAddrs, c.NodeID)
			ctx.del(memberKey(c.NodeID))
		}
		return wire.CodeResult{Code: wire.CodeOK}
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return wire.CodeResult{Code: wire.CodeBadRequest}
	}
	if s.kafka.memberAddrs[c.NodeID] != c.HTTPAddr {
		s.kafka.memberAddrs[c.NodeID] = c.HTTPAddr
		ctx.set(memberKey(c.NodeID), []byte(c.HTTPAddr))
	}
	return wire.CodeResult{Code: wire.CodeOK}
}

// MemberHTTPAddrs is the replicated map of raft member id to HTTP address,
// as this node has applied it (group 0).
func (s *Store) MemberHTTPAddrs() map[uint64]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[uint64]string, len(s.kafka.memberAddrs))
	for id, a := range s.kafka.memberAddrs {
		out[id] = a
	}
	return out
}
