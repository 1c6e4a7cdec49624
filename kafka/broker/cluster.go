package broker

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// tenantOf is THE place a Kafka request's tenant is decided: the tenant its
// SASL login resolved to (in tenancy mode the user name is the tenant's
// UUID, see sasl.go), the default tenant otherwise.
func (b *Broker) tenantOf(c *kafka.Conn) wire.ID {
	if id, ok := identityOf(c); ok {
		return id.Tenant
	}
	return wire.DefaultTenant
}

// groupLeader is the broker id leading raft group n, and its raft term:
// the Kafka leader (and leader epoch) of every partition the group holds,
// and the coordinator of the consumer groups and transactional ids hashed
// onto it (docs/placement.md). ok is false during an election, and while
// the leader's Kafka address is not known yet (it has not registered).
func (b *Broker) groupLeader(n int) (id int32, term uint64, ok bool) {
	node, term, ok := b.engine.Leader(n)
	if !ok {
		return -1, 0, false
	}
	if _, _, known := b.brokerAddr(node); !known {
		return -1, 0, false
	}
	return int32(node), term, true
}

// epochOf is the Kafka leader epoch of a raft term.
func epochOf(term uint64) int32 { return int32(min(term, math.MaxInt32)) }

// checkLeaderEpoch compares the leader epoch a client believes current
// (CurrentLeaderEpoch, -1 when it does not say) with the partition's raft
// term as this node knows it, as Kafka's Partition.checkCurrentLeaderEpoch
// does: an older one is fenced (the client missed a leader change and
// refreshes its metadata), a newer one unknown (this node missed it).
func checkLeaderEpoch(current int32, term uint64) error {
	switch epoch := epochOf(term); {
	case current < 0 || current == epoch:
		return nil
	case current < epoch:
		return fmt.Errorf("%w: %d, the partition is at %d", errFencedEpoch, current, epoch)
	default:
		return fmt.Errorf("%w: %d, this node knows %d", errUnknownEpoch, current, epoch)
	}
}

// leading checks that this node leads raft group g at the leader epoch a
// request believes current (-1: any), and returns the group's term and
// whether this leader has caught up with what an earlier one committed.
func (b *Broker) leading(g int, current int32) (term uint64, caughtUp bool, err error) {
	return b.leadingAt(g, 0, current)
}

// leadingAt is leading for a partition whose leader epoch is its group's
// term plus base (a moved partition's, wire.DirEntry.EpochBase): the term
// it returns and checks includes the base.
func (b *Broker) leadingAt(g int, base uint32, current int32) (term uint64, caughtUp bool, err error) {
	term, leads, caughtUp := b.engine.LeaderEpoch(g)
	term += uint64(base)
	if err := checkLeaderEpoch(current, term); err != nil {
		return term, false, err
	}
	if !leads {
		return term, false, errNotLeader
	}
	return term, caughtUp, nil
}

// brokerAddr is where clients reach node id: this node's own advertised
// address, or what the node registry holds for the others.
func (b *Broker) brokerAddr(id uint64) (string, int32, bool) {
	addr := ""
	if id == uint64(b.cfg.NodeID) {
		addr = b.cfg.AdvertisedAddr
	} else {
		for _, n := range b.engine.KafkaNodes() {
			if n.ID == id {
				addr = n.KafkaAddr
			}
		}
	}
	host, port, err := splitAddr(addr)
	return host, port, err == nil
}

func splitAddr(addr string) (string, int32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, err
	}
	return host, int32(port), nil
}

// brokers lists the live nodes Kafka clients can reach: the registry, less
// the nodes not heard from lately (as Kafka lists only live brokers), with
// this node's own address present unless it is draining.
func (b *Broker) brokers() []kmsg.MetadataResponseBroker {
	self := uint64(b.cfg.NodeID)
	var out []kmsg.MetadataResponseBroker
	add := func(id uint64, addr string) {
		if host, port, err := splitAddr(addr); err == nil {
			out = append(out, kmsg.MetadataResponseBroker{NodeID: int32(id), Host: host, Port: port})
		}
	}
	// A draining node is on its way out: clients must not pick it for
	// new requests (its leaderships have moved already).
	draining := b.draining.Load()
	seen := draining
	for _, n := range b.engine.KafkaNodes() {
		if n.ID == self && draining {
			continue
		}
		if n.ID == self {
			n.KafkaAddr, seen = b.cfg.AdvertisedAddr, true
		} else if !b.engine.NodeLive(n.ID) {
			continue
		}
		add(n.ID, n.KafkaAddr)
	}
	if !seen {
		add(self, b.cfg.AdvertisedAddr)
	}
	return out
}

// controllerID is the node leading group 0, which answers for the cluster
// as a whole; any node accepts admin requests (they are proposals), so this
// only tells clients where to send them.
func (b *Broker) controllerID() int32 {
	if id, ok := b.engine.ClusterLeader(); ok {
		return int32(id)
	}
	return b.cfg.NodeID
}

// clusterID names the cluster in Metadata and DescribeCluster.
const clusterID = "queen"

// registerNode records this node's advertised address in the replicated
// node registry (group 0), retrying until it is applied: that is how the
// other nodes learn where clients reach this one. Stale entries of a node
// that moved are overwritten when it boots at its new address.
func (b *Broker) registerNode() {
	defer b.wg.Done()
	cmd := wire.RegisterNodeCmd{NodeID: uint64(b.cfg.NodeID), KafkaAddr: b.cfg.AdvertisedAddr}
	backoff := 50 * time.Millisecond
	for {
		for _, n := range b.engine.KafkaNodes() {
			if n.ID == cmd.NodeID && n.KafkaAddr == cmd.KafkaAddr {
				return
			}
		}
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		err := b.engine.RegisterKafkaNode(ctx, &cmd)
		cancel()
		if err == nil {
			b.log.Info("kafka: node registered", "node", cmd.NodeID, "advertised", cmd.KafkaAddr)
			return
		}
		b.log.Debug("kafka: node registration not applied yet", "err", err)
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
