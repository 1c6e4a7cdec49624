package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// handleMetadata lists the tenant's queues as topics (spec decision 2):
// partition i is the queue's partition with permanent index i, led by the
// node leading the raft group holding it, in that leader's term as its
// leader epoch (docs/placement.md). Every node replicates every group, so
// each partition lists every registered node as replica and in sync, its
// leader first. Any node answers, from its own replicas. Unknown topics are
// created when the client allows it (always before v4) and may create
// topics (TOPIC_AUTHORIZATION_FAILED otherwise), with
// QUEEN_KAFKA_DEFAULT_PARTITIONS partitions. A topic with more partitions
// than QUEEN_KAFKA_METADATA_MAX_PARTITIONS (an HTTP queue per customer)
// answers POLICY_VIOLATION without partitions (partition_caps.go). Kafka's
// internal topics are listed too, marked internal (internal_topics.go), and
// never created. From v10 each topic carries its id (topic_ids.go), and
// from v12 topics may be asked for by id.
func (b *Broker) handleMetadata(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	tenant := b.tenantOf(c)
	// Read-your-writes (catch_up.go): a topic created or grown through
	// another node a moment ago is listed. A catch-up that fails (a
	// group between leaders) leaves the answer to this node's replicas:
	// a client refreshes its metadata on its own, and one that cannot
	// reach a leader has to learn where the leaders are.
	_ = b.catchUpMetadata(ctx, tenant, req)
	resp.Brokers = b.brokers()
	cid := clusterID
	resp.ClusterID = &cid
	resp.ControllerID = b.controllerID()

	var topics []storage.Topic
	var missing []string
	var internal []string // internal topics asked for (internal_topics.go)
	if req.Topics == nil {
		internal = internalTopics
		for _, t := range b.engine.KafkaTopics(tenant) {
			if !isInternalTopic(t.Name) { // an HTTP queue of that name is hidden
				topics = append(topics, t)
			}
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic == nil {
				// By topic id (v12+).
				topic, isInternal, ok := b.topicByID(tenant, t.TopicID)
				switch {
				case !ok:
					rt := kmsg.NewMetadataResponseTopic()
					rt.TopicID, rt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
					resp.Topics = append(resp.Topics, rt)
				case isInternal:
					internal = append(internal, topic.Name)
				default:
					topics = append(topics, topic)
				}
				continue
			}
			if isInternalTopic(*t.Topic) {
				internal = append(internal, *t.Topic)
			} else if topic, ok := b.engine.KafkaTopic(tenant, *t.Topic); ok {
				topics = append(topics, topic)
			} else {
				missing = append(missing, *t.Topic)
			}
		}
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	mayCreate := len(missing) > 0 && autoCreate && mayCreateTopics(c)
	created := 0 // partitions this request has added, for the request's cap
	for _, name := range missing {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		if autoCreate && (!mayCreate || !b.aclMayCreate(c, name)) {
			// As Kafka answers a client without CREATE that asks for it.
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		err := b.autoCreate(ctx, tenant, name, autoCreate, created)
		if err == nil {
			if topic, ok := b.engine.KafkaTopic(tenant, name); ok {
				topics = append(topics, topic)
				created += int(b.cfg.DefaultPartitions)
				continue
			}
			err = wire.ErrQueueNotFound
		}
		rt.ErrorCode = errorCode(err)
		if rt.ErrorCode == kerr.UnknownServerError.Code {
			rt.ErrorCode = kerr.LeaderNotAvailable.Code // retriable: the client asks again
		}
		resp.Topics = append(resp.Topics, rt)
	}
	leaders := groupLeaders{b: b, replicas: brokerIDs(resp.Brokers)}
	for _, t := range topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr(t.Name), topicID(tenant, t)
		if b.overMetadataCap(t.Partitions) {
			rt.ErrorCode = kerr.PolicyViolation.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		dir := b.engine.Dir(tenant, t.Name, 0, t.Partitions)
		// -1: the topic was deleted since it was listed, or an HTTP
		// queue's partition was removed as idle (docs/kafka.md).
		groups, bases := partitionGroups(dir, t)
		rt.Partitions = leaders.partitionsAt(groups, bases)
		resp.Topics = append(resp.Topics, rt)
	}
	for _, name := range internal {
		resp.Topics = append(resp.Topics, b.internalTopicMetadata(tenant, name, &leaders))
	}
	return resp, nil
}

// groupLeaders looks up the leader of each raft group once per request: a
// topic's partitions spread over every group, so a metadata answer names
// the same few leaders many times.
type groupLeaders struct {
	b        *Broker
	replicas []int32 // every registered node
	m        map[int]*groupLeader
}

// groupLeader is one raft group's leader as Metadata shows it.
type groupLeader struct {
	id       int32
	epoch    int32
	replicas []int32 // every registered node, the leader first
}

// partitions lists the partitions held by raft groups groups (by
// partition index; -1 for one that no longer exists), each led by its
// group's leader.
func (g *groupLeaders) partitions(groups []int) []kmsg.MetadataResponseTopicPartition {
	return g.partitionsAt(groups, nil)
}

// partitionsAt is partitions, each partition's leader epoch its group's
// term plus its base in bases (none when nil: no partition moved).
func (g *groupLeaders) partitionsAt(groups []int, bases []uint32) []kmsg.MetadataResponseTopicPartition {
	out := make([]kmsg.MetadataResponseTopicPartition, len(groups))
	for i, n := range groups {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.LeaderEpoch = int32(i), -1, -1
		p.Replicas, p.ISR = []int32{}, []int32{}
		var l *groupLeader
		if n >= 0 {
			l = g.of(n)
		}
		if l == nil {
			p.ErrorCode = kerr.LeaderNotAvailable.Code
		} else {
			p.Leader, p.LeaderEpoch, p.Replicas, p.ISR = l.id, l.epoch, l.replicas, l.replicas
			if bases != nil && bases[i] > 0 {
				p.LeaderEpoch = epochOf(uint64(l.epoch) + uint64(bases[i]))
			}
		}
		out[i] = p
	}
	return out
}

// of is raft group n's leader, nil while it has none (or its address is
// not registered yet).
func (g *groupLeaders) of(n int) *groupLeader {
	if l, seen := g.m[n]; seen {
		return l
	}
	if g.m == nil {
		g.m = map[int]*groupLeader{}
	}
	var l *groupLeader
	if id, term, ok := g.b.groupLeader(n); ok {
		l = &groupLeader{id: id, epoch: epochOf(term), replicas: []int32{id}}
		for _, r := range g.replicas {
			if r != id {
				l.replicas = append(l.replicas, r)
			}
		}
	}
	g.m[n] = l
	return l
}

// brokerIDs lists the node ids of a metadata broker list.
func brokerIDs(brokers []kmsg.MetadataResponseBroker) []int32 {
	out := make([]int32, len(brokers))
	for i, br := range brokers {
		out[i] = br.NodeID
	}
	return out
}

// autoCreate creates a topic a client asked about (Metadata) or produced
// to, when allowed and within the partition caps (inRequest: partitions the
// request has already created); a topic that appeared meanwhile is as good
// as created. CreateTopic rather than the engine's EnsureQueue: that would
// grow a topic created meanwhile with fewer partitions.
func (b *Broker) autoCreate(ctx context.Context, tenant wire.ID, name string, allowed bool, inRequest int) error {
	if !allowed {
		return wire.ErrQueueNotFound
	}
	if err := checkTopicName(name); err != nil {
		return err
	}
	if err := b.checkNewPartitions(tenant, inRequest, int(b.cfg.DefaultPartitions)); err != nil {
		return err
	}
	if policyOf(ctx) != nil { // the plan's caps (proxy_hooks.go)
		asks := []CreateAsk{{Topic: name, Partitions: int(b.cfg.DefaultPartitions)}}
		if policyCreate(ctx, asks); asks[0].Err != nil {
			return asks[0].Err
		}
	}
	// controller_mutation_rate, as Kafka's controller charges the
	// creation its broker forwards (client_quota_throttle.go).
	if err := chargeAutoCreate(ctx, int(b.cfg.DefaultPartitions)); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := b.engine.CreateTopic(cctx, &wire.CreateTopicCmd{Tenant: tenant, Name: name,
		Partitions: uint32(b.cfg.DefaultPartitions), ReqID: newReqID()})
	if err == nil {
		err = res.Code.Err()
	}
	if err != nil && !errors.Is(err, wire.ErrExists) {
		b.log.Debug("kafka: auto-creating a topic failed", "topic", name, "err", err)
		return err
	}
	return nil
}

// maxTopicName is Kafka's limit on a topic name's length.
const maxTopicName = 249

// checkTopicName applies Kafka's topic naming rules: 1 to 249 of
// [a-zA-Z0-9._-], and not "." or "..". Topics named otherwise can only come
// from HTTP queues, which Kafka clients still see by their names. Kafka's
// internal topics are never created: they exist already.
func checkTopicName(name string) error {
	if name == "" || len(name) > maxTopicName || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", errInvalidTopic, name)
	}
	if isInternalTopic(name) {
		return fmt.Errorf("%w: %q", errInternalTopic, name)
	}
	for i, ch := range name {
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
		if ok {
			continue
		}
		// Name the character whole: a byte of "café" would read 'Ã'.
		// %q keeps printable non-ASCII as it is and escapes the rest.
		if ch == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(name[i:]); size == 1 {
				return fmt.Errorf("%w: %q has '\\x%02x'", errInvalidTopic, name, name[i])
			}
		}
		return fmt.Errorf("%w: %q has %q", errInvalidTopic, name, ch)
	}
	return nil
}
