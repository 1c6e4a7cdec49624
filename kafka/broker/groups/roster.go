package groups

// Roster is a Kafka consumer group's membership as its coordinator last
// recorded it (Config.Persist), for people to read: the dashboard's
// consumer-group page. It is as of the group's last settled generation.
type Roster struct {
	ProtocolType string // "consumer" for Kafka consumers
	Protocol     string // the chosen assignor, e.g. "cooperative-sticky"
	Leader       string // the member that computed the assignment
	Members      []RosterMember
}

// RosterMember is one member. Assignment is the protocol's own encoding
// (for "consumer", a ConsumerMemberAssignment).
type RosterMember struct {
	ID, ClientID, ClientHost string
	Assignment               []byte
}

// DecodeRoster reads a recorded membership (storage.GroupMembers.State),
// members in join order.
func DecodeRoster(state []byte) (Roster, error) {
	g, err := decodeGroup("", 0, state)
	if err != nil {
		return Roster{}, err
	}
	r := Roster{ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	for _, m := range g.ordered() {
		r.Members = append(r.Members, RosterMember{ID: m.id, ClientID: m.clientID, ClientHost: m.clientHost, Assignment: m.assignment})
	}
	return r, nil
}
