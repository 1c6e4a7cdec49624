// Package groups is the Kafka group coordinator: the classic protocol's
// members, generations, protocol selection and join/sync/heartbeat/leave
// state machine of Apache Kafka's GroupCoordinator (static membership
// included, static.go), and KIP-848's consumer protocol, where the
// coordinator assigns partitions itself (consumer*.go); held in memory on
// the node that leads the raft group a group's id hashes onto (spec
// queen.md §3.1, docs/placement.md).
//
// It knows nothing of the network, the engine or committed offsets: the
// broker turns requests into calls here and persists offsets itself, asking
// ValidateCommit first. Time comes from an injected Clock, so every timer
// (session expiry, rebalance timeout, the initial rebalance delay, idle
// groups) can be driven by a test. The broker only relays assignments
// computed by the group's leader, so eager and cooperative assignors both
// work: a cooperative rebalance is just more join/sync rounds.
//
// Membership is replicated through the broker (Config.Persist and Restore,
// persist.go): a new raft leader continues each group at the generation it
// last settled in.
package groups

import (
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Clock is where the coordinator gets its timers. The real one is
// time.AfterFunc; tests drive a fake one.
type Clock interface {
	AfterFunc(d time.Duration, f func()) Stopper
}

// Stopper cancels a timer (time.Timer satisfies it).
type Stopper interface{ Stop() bool }

type realClock struct{}

func (realClock) AfterFunc(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }

// Config bounds what clients may ask for and sets the coordinator's timers.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (QUEEN_KAFKA_GROUP_MIN/MAX_SESSION_TIMEOUT_MS); outside them a
	// join gets INVALID_SESSION_TIMEOUT.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members (QUEEN_KAFKA_GROUP_JOIN_DELAY_MS).
	InitialRebalanceDelay time.Duration
	// Known says whether a group existed before this coordinator (it has
	// committed offsets). Membership is not kept across a coordinator
	// change, so a known group's first rebalance here waits twice the
	// initial delay: its members come back one by one as each notices the
	// old coordinator is gone, and one that rejoined alone would be given
	// partitions another still consumes.
	Known func(group string) bool
	// Persist, when set, receives a group's membership each time it
	// settles or empties (persist.go), to be written where the next
	// coordinator finds it. It is called under the coordinator's lock and
	// must not block; a later call supersedes an earlier one of the same
	// group.
	Persist func(group string, generation int32, state []byte)
	// Restore is the membership Persist last received for each group of
	// this coordinator, as recorded before it was built.
	Restore map[string]Recorded
	// IdleTimeout is how long an empty group stays in memory (10 min).
	IdleTimeout time.Duration
	// Clock defaults to the wall clock.
	Clock Clock
	// NewMemberID names a new member; it defaults to clientID-<uuid>.
	NewMemberID func(clientID string) string
	// Logger receives rebalance events at debug level.
	Logger *slog.Logger

	// Topics lists the topics consumer-protocol groups (KIP-848) may
	// subscribe to; it is called under the coordinator's lock.
	Topics func() []TopicInfo
	// ConsumerSessionTimeout is how long a consumer-protocol member may
	// go without a heartbeat (Kafka's group.consumer.session.timeout.ms);
	// ConsumerHeartbeatInterval is the interval members are told to
	// heartbeat at (group.consumer.heartbeat.interval.ms).
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
}

// Kafka's defaults for consumer-protocol groups.
const (
	DefaultConsumerSessionTimeout    = 45 * time.Second
	DefaultConsumerHeartbeatInterval = 5 * time.Second
)

// DefaultIdleTimeout is how long an empty group stays in memory (spec §3.1).
const DefaultIdleTimeout = 10 * time.Minute

// State is a group's state, named as Kafka names it in DescribeGroups and
// ListGroups.
type State int8

// Group states.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
	// Assigning and Reconciling are consumer-protocol states: a new
	// target assignment is being computed, or members are still moving
	// towards it.
	Assigning
	Reconciling
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Assigning:
		return "Assigning"
	case Reconciling:
		return "Reconciling"
	}
	return "Dead"
}

// Coordinator holds the groups of one tenant hashed onto one raft group
// while this node leads that raft group. All state is guarded by mu; timer callbacks take it
// too, so the state machine runs one event at a time.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	closed    bool
	groups    map[string]*group
	consumers map[string]*cgroup // consumer-protocol groups (consumer.go)
}

// New returns an empty coordinator.
func New(cfg Config) *Coordinator {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.NewMemberID == nil {
		cfg.NewMemberID = func(clientID string) string { return clientID + "-" + uuid.NewString() }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConsumerSessionTimeout <= 0 {
		cfg.ConsumerSessionTimeout = DefaultConsumerSessionTimeout
	}
	if cfg.ConsumerHeartbeatInterval <= 0 {
		cfg.ConsumerHeartbeatInterval = DefaultConsumerHeartbeatInterval
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, groups: map[string]*group{}, consumers: map[string]*cgroup{}}
	c.mu.Lock()
	c.restore(cfg.Restore)
	c.mu.Unlock()
	return c
}

// Close forgets every group, stops every timer and answers the joins and
// syncs still waiting with NOT_COORDINATOR, so their clients look for the
// new coordinator. It is what happens when this node stops leading.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for name, g := range c.groups {
		for _, m := range g.members {
			c.dropMember(m, kerr.NotCoordinator)
		}
		for _, p := range g.pending {
			p.stop()
		}
		g.join.stop()
		g.idle.stop()
		delete(c.groups, name)
	}
	for name, cg := range c.consumers {
		for _, m := range cg.members {
			m.session.stop()
			m.revokeBy.stop()
		}
		delete(c.consumers, name)
	}
}

// timer is a scheduled callback that runs under c.mu unless it was stopped
// first or the coordinator closed. stop and the fired check both happen
// under c.mu, so a callback that lost the race to stop does nothing.
type timer struct {
	t    Stopper
	done bool
}

func (t *timer) stop() {
	if t != nil && !t.done {
		t.done = true
		t.t.Stop()
	}
}

// after schedules f under c.mu. The caller holds c.mu.
func (c *Coordinator) after(d time.Duration, f func()) *timer {
	t := &timer{}
	t.t = c.cfg.Clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed || t.done {
			return
		}
		t.done = true
		f()
	})
	return t
}

// Listing is one group as ListGroups shows it.
type Listing struct {
	Group        string
	ProtocolType string
	State        State
	Consumer     bool // a consumer-protocol group, not a classic one
}

// List returns every group in memory.
func (c *Coordinator) List() []Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Listing, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, Listing{Group: g.name, ProtocolType: g.protocolType, State: g.state})
	}
	for _, cg := range c.consumers {
		out = append(out, Listing{Group: cg.name, ProtocolType: "consumer", State: cg.state(), Consumer: true})
	}
	return out
}

// Has reports whether the group is in memory (the broker's per-tenant
// group cap lets groups it already serves go on).
func (c *Coordinator) Has(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[group] != nil || c.consumers[group] != nil
}

// MemberDescription is one member as DescribeGroups shows it.
type MemberDescription struct {
	MemberID   string
	InstanceID string // a static member's group.instance.id
	ClientID   string
	ClientHost string
	Metadata   []byte // for the selected protocol, once Stable
	Assignment []byte // once Stable
}

// Description is one group as DescribeGroups shows it.
type Description struct {
	State        State
	ProtocolType string
	Protocol     string // once Stable
	Members      []MemberDescription
}

// Describe returns the group's state and members; ok is false when the
// group is not in memory.
func (c *Coordinator) Describe(group string) (Description, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cg := c.consumers[group]; cg != nil {
		return c.describeConsumer(cg), true
	}
	g := c.groups[group]
	if g == nil {
		return Description{}, false
	}
	d := Description{State: g.state, ProtocolType: g.protocolType}
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.ordered() {
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if stable {
			md.Metadata, md.Assignment = m.metadata(g.protocol), m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d, true
}

// Delete removes an empty group from memory (the caller deletes its
// offsets). A group with members or members still joining is refused with
// NON_EMPTY_GROUP; a group not in memory is not an error here, because its
// offsets may still exist.
func (c *Coordinator) Delete(group string) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.consumers[group] != nil {
		return kerr.NonEmptyGroup // a consumer group in memory has members
	}
	g := c.groups[group]
	if g == nil {
		return nil
	}
	if len(g.members) > 0 || len(g.pending) > 0 {
		return kerr.NonEmptyGroup
	}
	g.join.stop()
	g.idle.stop()
	delete(c.groups, group)
	return nil
}
