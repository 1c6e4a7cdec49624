package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Election types of ElectLeaders v1+.
const (
	electPreferred = 0
	electUnclean   = 1
)

// handleElectLeaders (key 43, v0-2) elects each asked partition's
// preferred leader (every partition of the tenant's topics when none is
// named): a partition is led by the leader of the raft group holding it,
// and the group's preferred leader is the node the balancer moves it to
// (spec decision 4), so the election is a raft leadership transfer to
// that node, answered once it leads (within the request's timeout, at
// most adminWait; REQUEST_TIMED_OUT past it). A partition already led by
// it answers ELECTION_NOT_NEEDED, as in Kafka. Electing one partition
// moves every partition its raft group holds, of any topic. Raft has no
// unclean election: an UNCLEAN request answers ELECTION_NOT_NEEDED for a
// partition with a leader and ELIGIBLE_LEADERS_NOT_AVAILABLE for one
// without (a raft group elects a leader by quorum or not at all). Any
// node answers (dragonboat forwards the transfer to the leader).
func (b *Broker) handleElectLeaders(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	tenant := b.tenantOf(c)
	wait := adminWait
	if req.TimeoutMillis > 0 {
		wait = min(wait, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	asks := req.Topics
	if asks == nil {
		_ = b.catchUpTenant(ctx, tenant)
		for _, t := range b.engine.KafkaTopics(tenant) {
			if isInternalTopic(t.Name) {
				continue
			}
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic = t.Name
			for i := range t.Partitions {
				rt.Partitions = append(rt.Partitions, int32(i))
			}
			asks = append(asks, rt)
		}
	}

	// Each partition's raft group, or why it has none.
	groups := make([][]int, len(asks))
	errs := make([][]error, len(asks))
	distinct := map[int]error{}
	for ti, t := range asks {
		b.catchUpUnknown(ctx, tenant, t.Topic, len(t.Partitions), func(i int) int32 { return t.Partitions[i] })
		groups[ti], errs[ti] = make([]int, len(t.Partitions)), make([]error, len(t.Partitions))
		for pi, index := range t.Partitions {
			n, err := b.partitionGroup(tenant, t.Topic, index)
			groups[ti][pi], errs[ti][pi] = n, err
			if err == nil {
				distinct[n] = nil
			}
		}
	}

	// One election per raft group, all at once: each waits for its own
	// transfer, and the request for the slowest.
	ectx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n := range distinct {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.elect(ectx, n, req.ElectionType)
			mu.Lock()
			distinct[n] = err
			mu.Unlock()
		}()
	}
	wg.Wait()

	for ti, t := range asks {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for pi, index := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = index
			err := errs[ti][pi]
			if err == nil {
				err = distinct[groups[ti][pi]]
			}
			rp.ErrorCode, rp.ErrorMessage = electionCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// errElectionNotNeeded is the answer for a group already led where asked.
var errElectionNotNeeded = errors.New("kafka: the partition is already led by its preferred leader")

// errNoEligibleLeader is an unclean election of a group with no leader.
var errNoEligibleLeader = errors.New("kafka: the partition's raft group has no leader; raft elects one by quorum only")

// elect runs one election of raft group n.
func (b *Broker) elect(ctx context.Context, n int, kind int8) error {
	switch kind {
	case electPreferred:
		moved, err := b.engine.ElectPreferred(ctx, n)
		if err == nil && !moved {
			return errElectionNotNeeded
		}
		return err
	case electUnclean:
		if _, _, ok := b.engine.Leader(n); ok {
			return errElectionNotNeeded
		}
		return errNoEligibleLeader
	}
	return fmt.Errorf("%w: election type %d", wire.ErrBadRequest, kind)
}

// partitionGroup is the raft group holding a topic's partition.
func (b *Broker) partitionGroup(tenant wire.ID, topic string, index int32) (int, error) {
	if isInternalTopic(topic) {
		groups := internalTopicGroups(b.engine, tenant)
		if index < 0 || int(index) >= len(groups) {
			return 0, wire.ErrPartitionNotFound
		}
		return groups[index], nil
	}
	p, ok := b.partition(tenant, topic, index)
	if !ok {
		return 0, wire.ErrPartitionNotFound
	}
	return p.group, nil
}

// electionCode is errorCode with the answers only elections give.
func electionCode(err error) int16 {
	switch {
	case errors.Is(err, errElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code
	case errors.Is(err, errNoEligibleLeader):
		return kerr.EligibleLeadersNotAvailable.Code
	case errors.Is(err, raftgroups.ErrNoLeader):
		return kerr.PreferredLeaderNotAvailable.Code
	}
	return errorCode(err)
}
