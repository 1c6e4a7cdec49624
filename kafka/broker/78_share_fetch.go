package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// defaultShareMaxRecords is KIP-1206's default when a request names none.
const defaultShareMaxRecords = 500

// shareRecheck bounds one wait of a parked ShareFetch: records come back
// to a group when a lease expires or a consumer releases them, which no
// produce announces, so a parked fetch looks again this often.
const shareRecheck = time.Second

// ShareFetch (key 78), v1-2: a share consumer's fetch within its share
// session (share_sessions.go). Acknowledgements it carries are applied
// first (share_records.go); then up to MaxRecords records are acquired
// from the session's partitions, each partition's under a lease of the
// acquisition lock timeout (the group's share.record.lock.duration.ms). With nothing to acquire it parks until
// MaxWaitMillis, woken by produces. A partition must be fetched from its
// leader (NOT_LEADER_OR_FOLLOWER otherwise).
func (b *Broker) handleShareFetch(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	acks := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			acks = acks || len(p.AcknowledgementBatches) > 0
		}
	}
	if acks && req.ShareSessionEpoch == 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code // a new session has acquired nothing to acknowledge
		return resp, nil
	}
	tenant, group, sess, code := b.beginShareRequest(c, req.GroupID, req.MemberID, req.ShareSessionEpoch, true)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	set := b.shareSettings(tenant, group)
	resp.AcquisitionLockTimeoutMillis = int32(set.lock / time.Millisecond)
	b.shareSessions.update(func() {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				sess.parts[tidp{t.TopicID, p.Partition}] = struct{}{}
			}
		}
		for _, f := range req.ForgottenTopicsData {
			for _, p := range f.Partitions {
				delete(sess.parts, tidp{f.TopicID, p})
				delete(sess.leases, tidp{f.TopicID, p})
			}
		}
	})
	out := newShareFetchAnswer(resp)
	topics := newShareTopics(b, tenant)
	topics.mayRead = b.aclTopicReader(c)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			batches := make([]shareAckBatch, len(p.AcknowledgementBatches))
			for i, a := range p.AcknowledgementBatches {
				batches[i] = shareAckBatch{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes}
			}
			key := tidp{t.TopicID, p.Partition}
			out.partition(key).AcknowledgeErrorCode = b.ackSharePartition(ctx, tenant, group, set, sess, topics, key, batches)
		}
	}
	if req.ShareSessionEpoch == -1 {
		// The final request of a session acknowledges, then releases.
		b.releaseShareSession(ctx, tenant, group, sess, topics)
		return resp, nil
	}
	if req.IsRenewAck {
		return resp, nil // a renewal (KIP-1222) acquires nothing new
	}
	b.acquireShare(ctx, tenant, group, set, req, sess, topics, out)
	return resp, nil
}

// beginShareRequest checks a ShareFetch's or ShareAcknowledge's group
// and member ids (Queen's queue-mode group is no Kafka group) and its
// session epoch, and returns the member's session, or the error code to
// answer with.
func (b *Broker) beginShareRequest(c *kafka.Conn, groupID, memberID *string, epoch int32, mayOpen bool) (wire.ID, string, *shareSession, int16) {
	tenant := b.tenantOf(c)
	group, member := deref(groupID), deref(memberID)
	switch {
	case group == "" || group == wire.QueueModeGroup:
		return tenant, group, nil, kerr.InvalidGroupID.Code
	case member == "":
		return tenant, group, nil, kerr.UnknownMemberID.Code
	}
	sess, kErr := b.shareSessions.begin(shareSessionKey{tenant, group, member}, epoch, mayOpen)
	if kErr != nil {
		return tenant, group, nil, kErr.Code
	}
	return tenant, group, sess, 0
}

// acquireShare acquires records from the session's partitions into out,
// parking while there are none (see handleShareFetch).
func (b *Broker) acquireShare(ctx context.Context, tenant wire.ID, group string, set shareSettings, req *kmsg.ShareFetchRequest,
	sess *shareSession, topics *shareTopics, out *shareFetchAnswer) {
	limit := int(req.MaxRecords)
	if limit <= 0 {
		limit = defaultShareMaxRecords
	}
	var parts []tidp
	b.shareSessions.update(func() {
		for k := range sess.parts {
			parts = append(parts, k)
		}
	})
	deadline := time.Now().Add(min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait))
	for {
		var changed []<-chan struct{}
		var releases []func()
		for _, name := range topics.namesOf(parts) {
			ch, release := b.engine.Changed(tenant, name)
			changed, releases = append(changed, ch), append(releases, release)
		}
		got, failed := b.acquireOnce(ctx, tenant, group, set, sess, topics, parts, limit, out)
		if got > 0 || failed || ctx.Err() != nil || !time.Now().Before(deadline) {
			for _, release := range releases {
				release()
			}
			return
		}
		wake := time.Now().Add(shareRecheck)
		if deadline.Before(wake) {
			wake = deadline
		}
		waitAny(ctx, changed, wake)
		for _, release := range releases {
			release()
		}
	}
}

// acquireOnce tries each partition once; it returns how many records it
// acquired and whether a partition failed (the fetch answers at once).
func (b *Broker) acquireOnce(ctx context.Context, tenant wire.ID, group string, set shareSettings, sess *shareSession, topics *shareTopics,
	parts []tidp, limit int, out *shareFetchAnswer) (int, bool) {
	got, failed := 0, false
	for _, k := range parts {
		if got >= limit {
			break
		}
		t, p, err := topics.partition(k)
		if err == nil && topics.refused(k) {
			// Checked on every fetch, as Kafka: READ taken away while
			// the partition is in the session stops it being served.
			out.partition(k).ErrorCode = kerr.TopicAuthorizationFailed.Code
			continue
		}
		if err == nil && !b.leads(p) {
			err = errNotLeader
		}
		if err == nil && !b.engine.MayPop(tenant, t.Name, group, p.Name, b.engine.NowMs()) {
			continue
		}
		var a acquired
		if err == nil {
			ts, _ := b.engine.TopicSettings(tenant, t.Name)
			a, err = b.shareAcquire(ctx, tenant, group, set, p, ts.LogAppendTime, limit-got)
		}
		if err != nil {
			rp := out.partition(k)
			rp.ErrorCode = errorCode(err)
			if rp.ErrorCode == kerr.UnknownTopicOrPartition.Code && !topics.known(k.id) {
				rp.ErrorCode = kerr.UnknownTopicID.Code
			}
			failed = true
			continue
		}
		if a.count == 0 {
			continue
		}
		b.shareSessions.update(func() { sess.leases[k] = a.lease })
		rp := out.partition(k)
		rp.Records, rp.AcquiredRecords = a.records, a.ranges
		got += a.count
	}
	return got, failed
}

// leads reports whether this node leads p's raft group.
func (b *Broker) leads(p cachedPartition) bool {
	_, leads, _ := b.engine.LeaderEpoch(p.group)
	return leads
}

// ackSharePartition applies one partition's acknowledgements under the
// session's lease of it and returns the partition's error code.
func (b *Broker) ackSharePartition(ctx context.Context, tenant wire.ID, group string, set shareSettings, sess *shareSession, topics *shareTopics,
	k tidp, batches []shareAckBatch) int16 {
	_, p, err := topics.partition(k)
	if err == nil && topics.refused(k) {
		return kerr.TopicAuthorizationFailed.Code
	}
	if err == nil && !b.leads(p) {
		err = errNotLeader
	}
	if err != nil {
		if code := errorCode(err); code != kerr.UnknownTopicOrPartition.Code || topics.known(k.id) {
			return code
		}
		return kerr.UnknownTopicID.Code
	}
	var lease shareLease
	b.shareSessions.update(func() { lease = sess.leases[k] })
	return b.shareAcknowledge(ctx, tenant, group, set.lock, p, lease.id, batches)
}

// shareTopics resolves topic ids for one request, looking each up once.
type shareTopics struct {
	b      *Broker
	tenant wire.ID
	byID   map[[16]byte]storage.Topic
	tried  map[[16]byte]bool
	// mayRead says whether the caller may READ a topic (ACLs,
	// acl_shares.go); nil: every topic.
	mayRead func(name string) bool
	refusal map[[16]byte]bool
}

func newShareTopics(b *Broker, tenant wire.ID) *shareTopics {
	return &shareTopics{b: b, tenant: tenant, byID: map[[16]byte]storage.Topic{}, tried: map[[16]byte]bool{}}
}

// known reports whether id names a topic of the tenant (not an internal one).
func (s *shareTopics) known(id [16]byte) bool {
	if !s.tried[id] {
		s.tried[id] = true
		if t, internal, ok := s.b.topicByID(s.tenant, id); ok && !internal {
			s.byID[id] = t
		}
	}
	_, ok := s.byID[id]
	return ok
}

// partition resolves one partition of a topic named by id.
func (s *shareTopics) partition(k tidp) (storage.Topic, cachedPartition, error) {
	if !s.known(k.id) {
		return storage.Topic{}, cachedPartition{}, wire.ErrPartitionNotFound
	}
	t := s.byID[k.id]
	p, ok := s.b.partition(s.tenant, t.Name, k.part)
	if !ok {
		return t, p, wire.ErrPartitionNotFound
	}
	return t, p, nil
}

// namesOf is the names of the known topics among parts, once each.
func (s *shareTopics) namesOf(parts []tidp) []string {
	seen := map[[16]byte]bool{}
	var out []string
	for _, k := range parts {
		if !seen[k.id] && s.known(k.id) {
			seen[k.id] = true
			out = append(out, s.byID[k.id].Name)
		}
	}
	return out
}

// shareFetchAnswer builds a ShareFetch response's partitions, each once.
type shareFetchAnswer struct {
	resp   *kmsg.ShareFetchResponse
	topics map[[16]byte]int
	parts  map[tidp]int
}

func newShareFetchAnswer(resp *kmsg.ShareFetchResponse) *shareFetchAnswer {
	return &shareFetchAnswer{resp: resp, topics: map[[16]byte]int{}, parts: map[tidp]int{}}
}

// partition is k's entry in the response, added on first use.
func (a *shareFetchAnswer) partition(k tidp) *kmsg.ShareFetchResponseTopicPartition {
	ti, ok := a.topics[k.id]
	if !ok {
		ti = len(a.resp.Topics)
		a.topics[k.id] = ti
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = k.id
		a.resp.Topics = append(a.resp.Topics, t)
	}
	t := &a.resp.Topics[ti]
	pi, ok := a.parts[k]
	if !ok {
		pi = len(t.Partitions)
		a.parts[k] = pi
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = k.part
		p.Records = []byte{}
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		t.Partitions = append(t.Partitions, p)
	}
	return &t.Partitions[pi]
}
