package proxy

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka/broker"
	"github.com/queen-mq/queen/wire"
)

// A Kafka login made with an API key is held to its cluster's plan as the
// cluster's HTTP requests are (seed 004; issue 33 item 1), each limit
// decided by the function HTTP uses and answered as Kafka answers it:
//
//   - queue and partition caps (census.overCaps): CreateTopics,
//     CreatePartitions and automatic creation answer POLICY_VIOLATION for
//     a topic over max_queues, INVALID_PARTITIONS over
//     max_partitions_per_queue; enforced only, as over HTTP;
//   - size caps (payloadTooLarge, tooManyItems): a record over
//     max_payload_bytes is MESSAGE_TOO_LARGE, a batch of more records
//     than max_items_per_push RECORD_LIST_TOO_LARGE; in shadow mode too;
//   - pushes blocked (pushBlocked: push_blocked or grace, the storage and
//     monthly quotas): every partition of a produce answers
//     TOPIC_AUTHORIZATION_FAILED with the reason; consuming stays open;
//   - suspended or deleting since the login: every request answers its
//     authorization error (the login itself is refused, KafkaPlain);
//   - rates (clusterRates.charge, the buckets HTTP takes from): a request
//     is served and its answer carries throttle_time_ms, as Kafka's client
//     quotas do; the login's next request waits it out (Kafka mutes the
//     channel); enforced only. The throttle is applied by the broker's
//     client-quota path (kafka/broker/client_quota_throttle.go), and the
//     limits are listed as the login's user entity's client quotas
//     (Quotas);
//   - metering (meter.add): produce as push, fetch as delivery, topic and
//     group administration as configure, transactions as txn, the rest as
//     read.
//
// Per request the login reads its cluster's view (refreshed at most every
// kafkaViewTTL) and the cluster's bucket pair; nothing takes a lock that
// every connection shares.

// kafkaViewTTL is how long a login keeps its cluster's status and limits
// before reading them again (from the proxy's cache): a status or
// override change reaches open connections within it.
const kafkaViewTTL = time.Second

// kafkaLogin is one Kafka login's hold on its cluster's plan.
type kafkaLogin struct {
	p       *Proxy
	cluster *Cluster
	tenant  wire.ID
	byKey   bool
	rates   *clusterRates

	view   atomic.Pointer[clusterView]
	viewAt atomic.Int64 // unix nanos of view
	// loggedAt (unix nanos) spaces the would_block lines of a throttled
	// login a second apart.
	loggedAt atomic.Int64
	// touchedAt (unix nanos) spaces the login's activity a second apart
	// (activity takes a lock of its own); pushed says it has shown a push.
	touchedAt atomic.Int64
	pushed    atomic.Bool
	// leave gives back a parked slot (made once: no closure per fetch).
	leave func()
}

var _ broker.Policy = (*kafkaLogin)(nil)

func (p *Proxy) newKafkaLogin(c *Cluster, tenant wire.ID, v *clusterView) *kafkaLogin {
	l := &kafkaLogin{p: p, cluster: c, tenant: tenant, byKey: true, rates: p.rates.of(c.ID)}
	l.leave = func() { p.parked.leave(c.ID) }
	l.view.Store(v)
	l.viewAt.Store(time.Now().UnixNano())
	return l
}

// current is the cluster's view, read again when older than kafkaViewTTL;
// when it cannot be read the last one stays.
func (l *kafkaLogin) current(now time.Time) *clusterView {
	v := l.view.Load()
	at := l.viewAt.Load()
	if now.UnixNano()-at < int64(kafkaViewTTL) || !l.viewAt.CompareAndSwap(at, now.UnixNano()) {
		return v
	}
	ctx, cancel := context.WithTimeout(l.p.base, 2*time.Second)
	defer cancel()
	c, found, err := l.p.clusterByID(ctx, l.cluster.ID)
	if err != nil || !found {
		if err == nil { // the cluster is gone: as suspended
			nv := *v
			nv.rank = statusRank(StatusDeleting)
			l.view.Store(&nv)
			return &nv
		}
		return v
	}
	nv, err := l.p.view(ctx, c)
	if err != nil {
		return v
	}
	l.view.Store(nv)
	return nv
}

// Before refuses every request once the cluster is suspended or being
// deleted. A throttled login's next request is held by the broker, on the
// path every client quota's throttle takes.
func (l *kafkaLogin) Before(_ context.Context, key int16) int16 {
	if l.current(time.Now()).rank >= statusRank(StatusSuspended) {
		return authorizationCode(key)
	}
	return 0
}

// authorizationCode is the authorization error of a request's resource,
// the one Kafka answers when the first resource it checks is refused:
// keys that act on the cluster (ACLs, log dirs, leader elections,
// reassignments, client quotas, SCRAM credentials, DescribeCluster) are
// CLUSTER_AUTHORIZATION_FAILED; the transaction keys, whose first check is
// the transactional id (AddOffsetsToTxn and TxnOffsetCommit before their
// group; Describe/ListTransactions describe ids),
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; group keys, share groups'
// included, GROUP_AUTHORIZATION_FAILED; the rest act on topics
// (DescribeProducers checks DESCRIBE on the topic in Kafka).
func authorizationCode(key int16) int16 {
	switch kmsg.Key(key) {
	case kmsg.FindCoordinator, kmsg.OffsetFetch, kmsg.DescribeGroups, kmsg.ListGroups, kmsg.OffsetCommit, kmsg.JoinGroup,
		kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.DeleteGroups, kmsg.OffsetDelete, kmsg.ConsumerGroupHeartbeat,
		kmsg.ConsumerGroupDescribe, kmsg.ShareGroupHeartbeat, kmsg.ShareGroupDescribe, kmsg.ShareFetch, kmsg.ShareAcknowledge,
		kmsg.DescribeShareGroupOffsets, kmsg.AlterShareGroupOffsets, kmsg.DeleteShareGroupOffsets:
		return kerr.GroupAuthorizationFailed.Code
	case kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit,
		kmsg.DescribeTransactions, kmsg.ListTransactions:
		return kerr.TransactionalIDAuthorizationFailed.Code
	case kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs, kmsg.AlterReplicaLogDirs, kmsg.DescribeLogDirs,
		kmsg.ElectLeaders, kmsg.AlterPartitionAssignments, kmsg.ListPartitionReassignments, kmsg.DescribeClientQuotas,
		kmsg.AlterClientQuotas, kmsg.DescribeUserSCRAMCredentials, kmsg.AlterUserSCRAMCredentials, kmsg.DescribeCluster:
		return kerr.ClusterAuthorizationFailed.Code
	}
	return kerr.TopicAuthorizationFailed.Code
}

// Produce is the plan's gate for one produce request.
func (l *kafkaLogin) Produce() broker.ProduceGate {
	now := time.Now()
	v := l.current(now)
	if err := l.p.pushBlocked(v, now); err != nil {
		he := status(err)
		return broker.ProduceGate{Refuse: &broker.PolicyError{Code: kerr.TopicAuthorizationFailed.Code,
			Msg: he.code + ": " + he.msg}}
	}
	// The caps HTTP's payloadTooLarge and tooManyItems compare with, as
	// numbers the broker compares a record's and a batch's size with
	// (size > cap, as they do) without a call per record.
	var g broker.ProduceGate
	if c, ok := payloadCap(v.limits); ok {
		g.MaxRecordBytes = clampInt(c)
	}
	if c, ok := itemsCap(v.limits); ok {
		g.MaxBatchRecords = clampInt(c)
	}
	return g
}

// clampInt is a cap as the gate's int, where 0 means none: a cap of 0
// (nothing may pass) becomes 1, which only an empty record passes.
func clampInt(v int64) int {
	return int(max(1, min(v, 1<<40)))
}

// Create applies the queue and partition caps to topics created or grown
// in order: each one accepted counts for the next.
func (l *kafkaLogin) Create(asks []broker.CreateAsk) {
	now := time.Now()
	v := l.current(now)
	// What the tenant has now, not a second ago: a create just made
	// through any door must count.
	l.p.census.forget(l.tenant)
	var accepted []queueTarget
	for i := range asks {
		a := &asks[i]
		t := queueTarget{queue: a.Topic, total: a.Partitions}
		err := l.p.capsRefusal(l.cluster, "kafka:create", v.limits, append(accepted, t))
		switch {
		case errors.Is(err, errQueueLimit):
			a.Err = &broker.PolicyError{Code: kerr.PolicyViolation.Code, Msg: "queue_limit: " + errQueueLimit.msg}
		case errors.Is(err, errPartitionLimit):
			a.Err = &broker.PolicyError{Code: kerr.InvalidPartitions.Code, Msg: "partition_limit: " + errPartitionLimit.msg +
				" (" + strconv.FormatInt(*v.limits[LimitMaxPartitions], 10) + ")"}
		default:
			accepted = append(accepted, t)
		}
	}
}

// After meters an answered request and charges it to the cluster's
// buckets, returning the throttle its answer carries.
func (l *kafkaLogin) After(u broker.Usage) time.Duration {
	now := time.Now()
	if !u.Refused {
		row := meterRow{Reqs: 1, Msgs: int64(u.Records), BytesIn: int64(u.BytesIn), BytesOut: int64(u.BytesOut)}
		op := "read"
		switch u.Class {
		case broker.UsageProduce:
			op = "push"
		case broker.UsageFetch:
			op = "delivery"
		case broker.UsageAdmin:
			op = "configure"
		case broker.UsageTxn:
			op = "txn"
		case broker.UsageRead:
			row.Msgs = 0
		}
		l.p.meter.add(l.cluster.ID, op, row)
		l.touch(u.Class == broker.UsageProduce && u.Records > 0, now)
	}
	msgs := 0
	if u.Class == broker.UsageProduce {
		msgs = u.Records
	}
	wait := l.rates.charge(l.current(now).limits, msgs, now)
	if wait <= 0 {
		return 0
	}
	l.logOver(now, "kafka:"+kmsg.NameForKey(u.Key), "rate")
	if !l.p.cfg.Enforce {
		return 0
	}
	return wait
}

// planQuotaKeys are the plan's limits a Kafka login's answers are
// throttled by, shown as client quota values of its user entity.
var planQuotaKeys = []string{LimitRequestsPerSec, LimitRequestsBurst, LimitMessagesPerSec, LimitMessagesBurst}

// Quotas are the cluster's rate limits (the plan's with the cluster's
// overrides) as client quota values, under the limits' own names: Kafka
// has no key for requests or messages per second, and reusing one
// (request_percentage is a share of handler time) would say something
// else. Unlimited ones are left out, as Kafka leaves out an unset quota.
func (l *kafkaLogin) Quotas() map[string]float64 {
	lim := l.current(time.Now()).limits
	out := make(map[string]float64, len(planQuotaKeys))
	for _, k := range planQuotaKeys {
		if v := lim[k]; v != nil {
			out[k] = float64(*v)
		}
	}
	return out
}

// parkedThrottle is the throttle of a fetch answered at once for want of
// a parked slot: HTTP's Retry-After for parked_limit.
const parkedThrottle = time.Second

// Park takes one of the cluster's parked slots (max_parked_pops) for a
// fetch that may wait for records, the slots HTTP's long-poll pops take.
// Without one, enforced, the fetch is answered with what there is now and
// throttled a second, as HTTP answers 429 parked_limit with Retry-After 1.
func (l *kafkaLogin) Park() (func(), bool, time.Duration) {
	now := time.Now()
	limit := l.current(now).limits[LimitMaxParkedPops]
	if limit == nil {
		return nil, true, 0
	}
	if l.p.parked.enter(l.cluster.ID, limit) {
		return l.leave, true, 0
	}
	l.logOver(now, "kafka:Fetch", "max_parked_pops")
	if !l.p.cfg.Enforce {
		l.p.parked.of(l.cluster.ID).Add(1)
		return l.leave, true, 0
	}
	return nil, false, parkedThrottle
}

// logOver logs a limit the login passes (would_block), at most once a
// second per login: a throttled client sends many requests a second.
func (l *kafkaLogin) logOver(now time.Time, path, limit string) {
	if last := l.loggedAt.Load(); now.UnixNano()-last >= int64(time.Second) && l.loggedAt.CompareAndSwap(last, now.UnixNano()) {
		l.p.overLimit(l.cluster, path, limit)
	}
}

// touch records the cluster's activity (last traffic, first push, key
// use) at most once a second per login, and at its first push.
func (l *kafkaLogin) touch(pushed bool, now time.Time) {
	first := pushed && !l.pushed.Load()
	last := l.touchedAt.Load()
	if !first && now.UnixNano()-last < int64(time.Second) {
		return
	}
	if !l.touchedAt.CompareAndSwap(last, now.UnixNano()) && !first {
		return
	}
	if first {
		l.pushed.Store(true)
	}
	l.p.activity.touch(l.cluster.ID, pushed, l.byKey, now)
}
