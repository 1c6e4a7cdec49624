package groups

import (
	"fmt"
	"slices"
	"strings"
)

// The target assignment: which partitions each member of a consumer group
// should hold, computed by the coordinator (the client-side assignors of
// the classic protocol have no say). It is recomputed, at a new group
// epoch, whenever members or subscriptions change or a subscribed topic
// is created, grows or is deleted.

// subscribedTopics resolves m's subscription against topics: the names it
// lists that exist and the names its regex matches, by name.
func (m *cmember) subscribedTopics(topics []TopicInfo) []TopicInfo {
	var out []TopicInfo
	for _, t := range topics {
		if slices.Contains(m.subscribed, t.Name) || (m.regex != nil && m.regex.MatchString(t.Name)) {
			out = append(out, t)
		}
	}
	return out
}

// topicsKey is the subscribed topics of every member as the target
// depends on them.
func topicsKey(subs map[string][]TopicInfo) string {
	seen := map[string]TopicInfo{}
	for _, ts := range subs {
		for _, t := range ts {
			seen[t.Name] = t
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s/%x/%d;", n, seen[n].ID, seen[n].Partitions)
	}
	return b.String()
}

// resolve is every member's subscribed topics, by member id.
func (c *Coordinator) resolve(cg *cgroup) map[string][]TopicInfo {
	var topics []TopicInfo
	if c.cfg.Topics != nil {
		topics = c.cfg.Topics()
	}
	subs := make(map[string][]TopicInfo, len(cg.members))
	for id, m := range cg.members {
		subs[id] = m.subscribedTopics(topics)
	}
	return subs
}

// checkTopics recomputes the target, at a new epoch, when the subscribed
// topics changed since it was computed. The caller holds c.mu.
func (c *Coordinator) checkTopics(cg *cgroup) {
	if subs := c.resolve(cg); topicsKey(subs) != cg.topics {
		c.computeTarget(cg, subs)
	}
}

// newTarget recomputes the target at a new epoch. The caller holds c.mu.
func (c *Coordinator) newTarget(cg *cgroup) { c.computeTarget(cg, c.resolve(cg)) }

func (c *Coordinator) computeTarget(cg *cgroup, subs map[string][]TopicInfo) {
	cg.epoch++
	cg.topics = topicsKey(subs)
	ids := sortedMemberIDs(cg)
	var target map[string]map[tp]bool
	if cg.assignor == RangeAssignor {
		target = assignRange(ids, subs)
	} else {
		prev := make(map[string]map[tp]bool, len(ids))
		for _, id := range ids {
			prev[id] = cg.members[id].target
		}
		target = assignUniform(ids, subs, prev)
	}
	for _, id := range ids {
		cg.members[id].target = target[id]
	}
	cg.assignEpoch = cg.epoch
	c.log.Debug("kafka consumer group target assignment", "group", cg.name, "epoch", cg.epoch, "members", len(ids), "assignor", cg.assignor)
}

// assignRange gives each topic's subscribers consecutive ranges of its
// partitions, the first members (by id) one more when they do not divide
// evenly, as Kafka's range assignor does.
func assignRange(ids []string, subs map[string][]TopicInfo) map[string]map[tp]bool {
	out := make(map[string]map[tp]bool, len(ids))
	byTopic := map[string][]string{}
	info := map[string]TopicInfo{}
	for _, id := range ids {
		out[id] = map[tp]bool{}
		for _, t := range subs[id] {
			byTopic[t.Name] = append(byTopic[t.Name], id)
			info[t.Name] = t
		}
	}
	for name, members := range byTopic {
		t := info[name]
		k := int32(len(members))
		per, extra := t.Partitions/k, t.Partitions%k
		start := int32(0)
		for i, id := range members {
			n := per
			if int32(i) < extra {
				n++
			}
			for p := start; p < start+n; p++ {
				out[id][tp{t.ID, p}] = true
			}
			start += n
		}
	}
	return out
}

// assignUniform spreads every subscribed partition evenly over the
// members subscribing to its topic, keeping each member's previous target
// as far as its fair share allows so that few partitions move.
func assignUniform(ids []string, subs map[string][]TopicInfo, prev map[string]map[tp]bool) map[string]map[tp]bool {
	out := make(map[string]map[tp]bool, len(ids))
	eligible := map[tp][]string{}
	var all []tp
	for _, id := range ids {
		out[id] = map[tp]bool{}
		for _, t := range subs[id] {
			for p := range t.Partitions {
				k := tp{t.ID, p}
				if eligible[k] == nil {
					all = append(all, k)
				}
				eligible[k] = append(eligible[k], id)
			}
		}
	}
	active := 0
	for _, id := range ids {
		if len(subs[id]) > 0 {
			active++
		}
	}
	if active == 0 {
		return out
	}
	quota := (len(all) + active - 1) / active
	taken := map[tp]bool{}
	for _, id := range ids {
		for _, p := range sortedParts(prev[id]) {
			if len(out[id]) < quota && !taken[p] && slices.Contains(eligible[p], id) {
				out[id][p], taken[p] = true, true
			}
		}
	}
	for _, p := range sortTPs(all) {
		if taken[p] {
			continue
		}
		best := ""
		for _, id := range eligible[p] {
			if best == "" || len(out[id]) < len(out[best]) {
				best = id
			}
		}
		out[best][p], taken[p] = true, true
	}
	return out
}
