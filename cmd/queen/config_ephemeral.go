package main

import (
	"time"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage/ephemeral"
)

// ephemeralConfig reads the ephemeral queues' variables (spec §8.3). The
// peers are the raft ones: every voter holds ephemeral partitions, and the
// calls between them go over the node channel, which carries
// QUEEN_RAFT_TOKEN (spec §4.2) and TLS between nodes.
// QUEEN_EPHEMERAL_REQUIRE_GRANT defaults to the tenancy header flag (spec
// §5.4): behind a proxy, a tenant needs an operator's grant.
func (e *env) ephemeralConfig(r raftgroups.Config, tenancyHeader bool) api.EphemeralConfig {
	c := api.EphemeralConfig{
		Store: ephemeral.Config{
			MaxBytes: int64(e.int("QUEEN_EPHEMERAL_MAX_BYTES", 256<<20, 1<<10, 1<<40)),
			Defaults: ephemeral.Options{
				MaxBytes:   int64(e.int("QUEEN_EPHEMERAL_QUEUE_MAX_BYTES", 16<<20, 1<<10, 1<<40)),
				MaxLength:  e.int("QUEEN_EPHEMERAL_QUEUE_MAX_LENGTH", 10000, 1, 1<<30),
				Policy:     ephemeral.PolicyReject,
				Lease:      time.Duration(e.int("QUEEN_EPHEMERAL_LEASE_S", 30, 1, 86400)) * time.Second,
				RetryLimit: e.int("QUEEN_EPHEMERAL_RETRY_LIMIT", 5, 0, 1<<20),
			},
			ImplicitIdle: time.Duration(e.int("QUEEN_EPHEMERAL_IMPLICIT_IDLE_S", 300, 1, 1<<31-1)) * time.Second,
		},
		NodeID:          r.NodeID,
		MemberTTL:       e.millis("QUEEN_EPHEMERAL_MEMBER_TTL_MS", 4*time.Second, 200*time.Millisecond, 10*time.Minute),
		HandoverTimeout: 15 * time.Second,
		Rate:            e.int("QUEEN_EPHEMERAL_RATE", 5000, 0, 1<<30),
		Burst:           e.int("QUEEN_EPHEMERAL_BURST", 10000, 1, 1<<30),
		RequireGrant:    e.bool("QUEEN_EPHEMERAL_REQUIRE_GRANT", tenancyHeader),
	}
	for _, p := range r.Peers {
		c.Peers = append(c.Peers, p.ID)
	}
	return c
}
