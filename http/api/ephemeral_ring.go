package api

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage/ephemeral"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// EphemeralConfig is the ephemeral queues' configuration (spec §1.11,
// §8.3), filled by cmd/queen.
type EphemeralConfig struct {
	Store  ephemeral.Config
	NodeID uint64
	// Peers are the ids of every node, this one included; none: a single
	// node. Calls to them go over the node channel (node.go), which
	// carries the raft token and TLS between nodes.
	Peers []uint64
	// PeersFunc, when set, is the cluster's current membership, read
	// every probe; Peers is only the boot-time list.
	PeersFunc func() []uint64
	// MemberTTL is how long a peer counts as live after it last answered
	// (QUEEN_EPHEMERAL_MEMBER_TTL_MS).
	MemberTTL time.Duration
	// HandoverTimeout bounds the hand-over at shutdown (spec §4.9: 15 s).
	HandoverTimeout time.Duration
	// Rate and Burst limit each tenant's pushed messages per node
	// (QUEEN_EPHEMERAL_RATE, _BURST); Rate 0 is no limit.
	Rate, Burst int
	// RequireGrant admits only tenants an operator granted ephemeral
	// queues (QUEEN_EPHEMERAL_REQUIRE_GRANT; system_settings.go).
	RequireGrant bool
}

// Headers of relayed ephemeral requests. A request a peer relayed over the
// node channel is answered from this node's store alone; its tenant is the
// one the first node resolved (x-queen-tenant), trusted because the node
// channel checked the raft token, and hopsHeader counts the relays. Queen
// loses the tenant on a forward (spec §6.12); carrying it is the fix.
const (
	hopsHeader = "x-queen-ephemeral-hops"
	maxHops    = 3
)

// ring decides which live node owns each ephemeral partition (rendezvous
// hashing over the live nodes), keeps the live set fresh by probing the
// peers, and moves partitions to their owner when it changes. It owns one
// goroutine (loop), started by Server.Start and stopped by leave.
type ring struct {
	cfg   EphemeralConfig
	store *ephemeral.Store
	log   *slog.Logger
	link  NodeLink // calls to the peers
	// peers is every peer (not this node); replaced whole when the
	// membership changes, never modified in place.
	peers atomic.Pointer[map[uint64]bool]
	rate  *ephRate

	mu       sync.Mutex
	lastSeen map[uint64]time.Time
	departed map[uint64]bool // peers that said they are leaving
	refused  map[uint64]bool // peers that refused our token (warned once)

	leaving   atomic.Bool
	enabled   atomic.Bool
	switchVer atomic.Int64 // the system switch's stamp: the newest wins
	// stored, when set, reads the switch as raft keeps it (durable across
	// restarts); it is merged like a peer's gossip, the newest stamp
	// winning.
	stored func() (ephSwitch, bool)

	stop chan struct{}
	done chan struct{}
}

func newRing(cfg EphemeralConfig, link NodeLink, log *slog.Logger) *ring {
	if cfg.MemberTTL <= 0 {
		cfg.MemberTTL = 4 * time.Second
	}
	if cfg.HandoverTimeout <= 0 {
		cfg.HandoverTimeout = 15 * time.Second
	}
	if cfg.Store.MaxBytes == 0 {
		cfg.Store = ephemeral.DefaultConfig()
	}
	r := &ring{cfg: cfg, store: ephemeral.New(cfg.Store), log: log, link: link,
		lastSeen: map[uint64]time.Time{}, departed: map[uint64]bool{}, refused: map[uint64]bool{}}
	r.setPeers(cfg.Peers)
	r.rate = newEphRate(cfg.Rate, cfg.Burst)
	r.enabled.Store(true)
	return r
}

// setPeers replaces the peer list (this node is left out).
func (r *ring) setPeers(peers []uint64) {
	m := map[uint64]bool{}
	for _, id := range peers {
		if id != r.cfg.NodeID {
			m[id] = true
		}
	}
	r.peers.Store(&m)
}

// peerSet is the current peer set; the caller must not modify it.
func (r *ring) peerSet() map[uint64]bool { return *r.peers.Load() }

// live is the set of nodes that may own partitions now: this node unless
// it is leaving, and every peer heard from within MemberTTL that has not
// said it is leaving.
func (r *ring) live(now time.Time) []uint64 {
	var out []uint64
	if !r.leaving.Load() {
		out = append(out, r.cfg.NodeID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.peerSet() {
		if seen, ok := r.lastSeen[id]; ok && now.Sub(seen) < r.cfg.MemberTTL && !r.departed[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// owner is the live node with the highest rendezvous score for k; 0 when
// no node is live (this one leaving alone).
func (r *ring) owner(k ephemeral.Key, now time.Time) uint64 {
	var best, bestScore uint64
	for _, id := range r.live(now) {
		h := fnv.New64a()
		var b [8]byte
		for i := range b {
			b[i] = byte(id >> (8 * i))
		}
		h.Write(b[:])
		h.Write([]byte(k.Tenant))
		h.Write([]byte{0})
		h.Write([]byte(k.Queue))
		h.Write([]byte{0})
		h.Write([]byte(k.Partition))
		score := mix(h.Sum64())
		if best == 0 || score > bestScore {
			best, bestScore = id, score
		}
	}
	return best
}

// mix spreads FNV's weak high bits (splitmix64's finaliser), so the
// scores of different nodes for one key are independent.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// readyMsg is exchanged by _ready probes both ways: liveness, leaving,
// and the system switch (gossiped: the newest stamp wins everywhere).
type readyMsg struct {
	Node          uint64 `json:"node"`
	Leaving       bool   `json:"leaving"`
	Enabled       bool   `json:"enabled"`
	SwitchVersion int64  `json:"switchVersion"`
}

func (r *ring) readyMsg() readyMsg {
	return readyMsg{Node: r.cfg.NodeID, Leaving: r.leaving.Load(), Enabled: r.enabled.Load(), SwitchVersion: r.switchVer.Load()}
}

// heard records a peer's message.
func (r *ring) heard(m readyMsg, now time.Time) {
	if r.peerSet()[m.Node] {
		r.mu.Lock()
		r.lastSeen[m.Node] = now
		r.departed[m.Node] = m.Leaving
		r.mu.Unlock()
	}
	r.mergeSwitch(m.Enabled, m.SwitchVersion)
}

func (r *ring) mergeSwitch(enabled bool, ver int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ver > r.switchVer.Load() {
		r.switchVer.Store(ver)
		r.enabled.Store(enabled)
	}
}

// setSwitch flips the system switch here and tells the peers at once.
func (r *ring) setSwitch(enabled bool, stamp int64) {
	r.mergeSwitch(enabled, stamp)
	r.probe()
}

// mergeStored merges the durable switch, if there is one.
func (r *ring) mergeStored() {
	if r.stored == nil {
		return
	}
	if sw, ok := r.stored(); ok {
		r.mergeSwitch(sw.Enabled, sw.Stamp)
	}
}

// start probes the peers once, so the first requests are routed with a
// known live set, then runs the loop.
func (r *ring) start() {
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	r.mergeStored()
	r.probe()
	go r.loop()
}

// loop probes, sweeps and rebalances every quarter of MemberTTL until
// stop is closed.
func (r *ring) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.MemberTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		if r.cfg.PeersFunc != nil {
			// A node added or removed since boot is in the membership,
			// not in QUEEN_RAFT_PEERS.
			r.setPeers(r.cfg.PeersFunc())
		}
		// A restarted node, or one that missed the gossip, takes the
		// switch from raft.
		r.mergeStored()
		r.probe()
		now := time.Now()
		r.store.Sweep(now)
		r.rebalance(now)
	}
}

// probe calls every peer's _ready at once and waits for all answers.
func (r *ring) probe() {
	body, _ := json.Marshal(r.readyMsg())
	var wg sync.WaitGroup
	for id := range r.peerSet() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, resp, err := r.call(id, "ephemeral/_ready", body, time.Second)
			if status == http.StatusUnauthorized && r.refusedOnce(id) {
				r.log.Warn("ephemeral: peer refused this node's QUEEN_RAFT_TOKEN; it cannot own partitions with this node", "peer", id)
			}
			var m readyMsg
			if err != nil || status != http.StatusOK || json.Unmarshal(resp, &m) != nil || m.Node != id {
				return
			}
			r.heard(m, time.Now())
		}()
	}
	wg.Wait()
}

// refusedOnce says whether this is the first refusal from peer, so the
// warning is logged once, not every probe.
func (r *ring) refusedOnce(peer uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := !r.refused[peer]
	r.refused[peer] = true
	return first
}

// rebalance sends every partition held here whose owner is now another
// node to that node. It runs every tick, not only when the live set
// changes, so a push that raced a change of owner is moved a tick later.
func (r *ring) rebalance(now time.Time) {
	self := r.cfg.NodeID
	dumps := r.store.Take(func(k ephemeral.Key) bool {
		o := r.owner(k, now)
		return o != 0 && o != self
	})
	if len(dumps) == 0 {
		return
	}
	delivered, failed := r.send(dumps, now, context.Background())
	if len(failed) > 0 {
		// The owner could not be reached: keep them here and try again.
		if _, lost, err := r.store.Adopt(failed, now); err != nil || lost > 0 {
			r.log.Warn("ephemeral: messages lost in a failed move", "lost", lost, "err", err)
		}
	}
	r.log.Info("ephemeral: partitions moved to their owner", "partitions", len(dumps)-len(failed), "messages", delivered)
}

// send adopts dumps at their owners; it answers how many messages went
// and the dumps that did not.
func (r *ring) send(dumps []ephemeral.Dump, now time.Time, ctx context.Context) (delivered int, failed []ephemeral.Dump) {
	byOwner := map[uint64][]ephemeral.Dump{}
	for _, d := range dumps {
		o := r.owner(d.Key, now)
		byOwner[o] = append(byOwner[o], d)
	}
	for o, ds := range byOwner {
		if !r.peerSet()[o] {
			failed = append(failed, ds...)
			continue
		}
		body, _ := json.Marshal(adoptReq{From: r.cfg.NodeID, Dumps: ds})
		timeout := 10 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(dl))
		}
		status, resp, err := r.call(o, "ephemeral/_adopt", body, timeout)
		var ans adoptAnswer
		if err != nil || status != http.StatusOK || json.Unmarshal(resp, &ans) != nil {
			r.log.Warn("ephemeral: hand-over refused or unreachable", "to", o, "status", status, "err", err)
			failed = append(failed, ds...)
			continue
		}
		delivered += ans.Accepted
		if ans.Lost > 0 {
			r.log.Warn("ephemeral: the new owner had no room for some messages", "to", o, "lost", ans.Lost)
		}
	}
	return delivered, failed
}

type adoptReq struct {
	From  uint64           `json:"from"`
	Dumps []ephemeral.Dump `json:"dumps"`
}

type adoptAnswer struct {
	Accepted int `json:"accepted"`
	Lost     int `json:"lost"`
}

// leave hands every partition to its next owner before the node stops
// (spec §4.9): it leaves the live set, tells the peers, seals the store so
// late requests re-route, and sends what it holds, retrying until ctx
// ends. The loop is stopped before anything else.
func (r *ring) leave(ctx context.Context) {
	if r.stop == nil {
		return
	}
	// Stop the loop first: a move it had under way must not end by
	// re-adopting into the sealed store (which would lose it).
	close(r.stop)
	<-r.done
	r.leaving.Store(true)
	body, _ := json.Marshal(r.readyMsg())
	for id := range r.peerSet() {
		_, _, _ = r.call(id, "ephemeral/_leaving", body, time.Second)
	}
	r.store.Seal()
	dumps := r.store.Take(func(ephemeral.Key) bool { return true })
	parts, total := len(dumps), 0
	for _, d := range dumps {
		total += len(d.Messages)
	}
	delivered := 0
	// A single node has nowhere to send them: no point waiting.
	for len(dumps) > 0 && len(r.peerSet()) > 0 && ctx.Err() == nil {
		var n int
		n, dumps = r.send(dumps, time.Now(), ctx)
		delivered += n
		if len(dumps) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // a peer restarting; try again
			}
		}
	}
	r.log.Info("shutdown: ephemeral rings handed over", "rings", parts, "delivered", delivered, "lost", total-delivered)
}

// call POSTs one of the ring's own node routes (_ready, _leaving, _adopt)
// to peer id.
func (r *ring) call(id uint64, route string, body []byte, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ans, err := callPeer(ctx, r.link, id, http.MethodPost, route, http.Header{"Content-Type": {"application/json"}}, body, 1<<20)
	return ans.status, ans.body, err
}

var errUnrouted = &apiError{http.StatusServiceUnavailable, "retry", "the ephemeral partition's owner cannot be reached"}

// relayFailed is the answer to a request whose relay to the partition's
// owner failed: unrouted when nothing ran there, else an unknown outcome
// (the owner may have stored a push, or acked, before its answer was lost).
func relayFailed(err error) error {
	if relayRan(err) {
		return &apiError{http.StatusServiceUnavailable, "outcome_unknown",
			"the ephemeral partition's owner did not answer; the request may have applied there"}
	}
	return errUnrouted
}

// peerTenant says whether a peer relayed the request over the node channel
// and, if so, answers the tenant it carries and its hop count. On the
// broker port the headers mean nothing: a client cannot pose as a peer.
func (r *ring) peerTenant(ctx *fasthttp.RequestCtx) (tenant wire.ID, hops int, forwarded bool, err error) {
	if !fromPeer(ctx) {
		return tenant, 0, false, nil
	}
	hops, perr := strconv.Atoi(string(ctx.Request.Header.Peek(hopsHeader)))
	if perr != nil || hops < 1 {
		return tenant, 0, true, badRequest(hopsHeader + " must be a positive number")
	}
	tenant, err = tenancy.Parse(string(ctx.Request.Header.Peek(tenancy.Header)))
	if err != nil {
		return tenant, hops, true, badRequest("relayed request with a bad tenant")
	}
	return tenant, hops, true, nil
}

// storeError maps the engine's errors.
func storeError(err error) error {
	switch {
	case errors.Is(err, ephemeral.ErrFull):
		return &apiError{http.StatusInsufficientStorage, "ephemeral_full", "the ephemeral queue or this node's ephemeral memory is full (policy reject)"}
	case errors.Is(err, ephemeral.ErrBadOptions):
		return badRequest(err.Error())
	case errors.Is(err, ephemeral.ErrNotFound):
		return &apiError{http.StatusNotFound, "queue_not_found", "no such ephemeral queue"}
	}
	return err
}
