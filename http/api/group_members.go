package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/kafka/broker/groups"
)

// groupMembersAnswer is a Kafka consumer group's members as its
// coordinator last recorded them (at the group's last settled
// generation). kafka is false, with no members, for a group no Kafka
// coordinator has recorded: an HTTP group, or a Kafka group that only
// commits offsets or has no members now.
type groupMembersAnswer struct {
	Group        string            `json:"group"`
	Kafka        bool              `json:"kafka"`
	Generation   int32             `json:"generation"`
	ProtocolType string            `json:"protocolType"`
	Protocol     string            `json:"protocol"`
	Leader       string            `json:"leader"`
	Members      []groupMemberView `json:"members"`
	Total        int               `json:"totalMembers"`
	NextCursor   *string           `json:"nextCursor"`
}

type groupMemberView struct {
	MemberID   string `json:"memberId"`
	ClientID   string `json:"clientId"`
	ClientHost string `json:"clientHost"`
	// Assignment is the member's topics and partitions when the group
	// uses the consumer protocol; null otherwise.
	Assignment []memberTopic `json:"assignment"`
}

type memberTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupMembers is GET /api/v1/consumer-groups/:group/members[?limit=&cursor=]:
// a page of a Kafka group's members by member id, read from the raft
// group its coordinator records into, after a barrier.
func (s *Server) groupMembers(ctx *fasthttp.RequestCtx) error {
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	name := pathArg(ctx, "group")
	if err := checkNameSize("consumerGroup", name); err != nil {
		return err
	}
	p, err := readPage(ctx, defaultPageLimit, maxPageLimit)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	recorded, err := s.engine.GroupMembers(rctx, s.engine.CoordinatorGroup(tenant, 'g', name), tenant)
	if err != nil {
		return err
	}
	ans := groupMembersAnswer{Group: name, Members: []groupMemberView{}}
	rec, ok := recorded[name]
	if ok && len(rec.State) > 0 {
		roster, err := groups.DecodeRoster(rec.State)
		if err != nil {
			return fmt.Errorf("api: group %q's recorded membership: %w", name, err)
		}
		ans.Kafka, ans.Generation = true, rec.Generation
		ans.ProtocolType, ans.Protocol, ans.Leader = roster.ProtocolType, roster.Protocol, roster.Leader
		ans.Total = len(roster.Members)
		ms := slices.Clone(roster.Members)
		slices.SortFunc(ms, func(a, b groups.RosterMember) int { return strings.Compare(a.ID, b.ID) })
		page, next, err := pageOf(p, ms, func(m *groups.RosterMember) nameKey { return nameKey{m.ID} }, cmpName)
		if err != nil {
			return err
		}
		for _, m := range page {
			v := groupMemberView{MemberID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if roster.ProtocolType == "consumer" {
				v.Assignment = consumerAssignment(m.Assignment)
			}
			ans.Members = append(ans.Members, v)
		}
		ans.NextCursor = next
		setNextCursor(ctx, next)
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// consumerAssignment decodes a consumer-protocol assignment; nil when the
// bytes are not one (a client's own protocol under the consumer type).
func consumerAssignment(b []byte) []memberTopic {
	var a kmsg.ConsumerMemberAssignment
	if len(b) == 0 || a.ReadFrom(b) != nil {
		return nil
	}
	out := make([]memberTopic, 0, len(a.Topics))
	for _, t := range a.Topics {
		out = append(out, memberTopic{Topic: t.Topic, Partitions: t.Partitions})
	}
	return out
}
