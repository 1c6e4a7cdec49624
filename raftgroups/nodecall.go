package raftgroups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/queen-mq/queen/raftgroups/transport"
)

// Node-to-node HTTP calls ride on group 0's raft listener (transport
// node.go), so TLS between nodes and the raft token cover them as they
// cover raft. The broker port is never called by a peer.

// ErrUnknownPeer is CallPeer's error for an id that is not a member.
var ErrUnknownPeer = errors.New("raftgroups: no such peer")

// appliedRoute is the node route this package serves itself: every
// group's applied index, which a membership leader asks a member for to
// measure its lag (memberLag). It works before the layer above installs
// its handler, so a joining learner answers it as soon as it listens.
const appliedRoute = "raft/applied"

// nodeRoutes holds the handler of node-to-node routes, set once the layer
// above exists; group 0's listener starts before it does.
type nodeRoutes struct {
	h    atomic.Pointer[http.Handler]
	host *Host
}

func (n *nodeRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == NodePath(appliedRoute) {
		n.host.serveApplied(w, r)
		return
	}
	h := n.h.Load()
	if h == nil {
		http.Error(w, "node routes not ready", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// SetNodeHandler installs the handler of node-to-node routes: requests
// arrive with the path /node/v1/<route>, already past TLS and the token.
func (h *Host) SetNodeHandler(handler http.Handler) { h.nodeRoutes.h.Store(&handler) }

// CallPeer makes a node-to-node call to route (which may end in a query)
// on peer id (see SetNodeHandler), with header's fields. It is over TLS
// when the node has it, carries the raft token, and is bounded by ctx or,
// without a deadline, the request timeout. The caller closes the body.
func (h *Host) CallPeer(ctx context.Context, id uint64, method, route string, header http.Header, body io.Reader) (*http.Response, error) {
	addr := h.groups[0].addr(id)
	if addr == "" {
		return nil, ErrUnknownPeer
	}
	return h.nodeClient.Do(ctx, addr, method, route, header, body)
}

// NodePath is the path a node route arrives with.
func NodePath(route string) string { return transport.NodePath(route) }

// appliedAnswer is appliedRoute's body.
type appliedAnswer struct {
	Groups []groupApplied `json:"groups"`
	// NewestFormat is the newest format the member's build applies
	// (format.go); builds before the format gate send none (FormatV1).
	NewestFormat uint32 `json:"newestFormat,omitempty"`
}

type groupApplied struct {
	Group   int    `json:"group"`
	Applied uint64 `json:"applied"`
}

func (h *Host) serveApplied(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	ans := appliedAnswer{NewestFormat: h.newestFormat()}
	for _, g := range h.groups {
		ans.Groups = append(ans.Groups, groupApplied{Group: g.n, Applied: g.store.Applied()})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// peerApplied asks node id for its applied index per group.
func (h *Host) peerApplied(ctx context.Context, id uint64) ([]groupApplied, error) {
	ans, err := h.peerAnswer(ctx, id)
	return ans.Groups, err
}

// peerAnswer is node id's answer on the applied route.
func (h *Host) peerAnswer(ctx context.Context, id uint64) (appliedAnswer, error) {
	resp, err := h.CallPeer(ctx, id, http.MethodGet, appliedRoute, nil, nil)
	if err != nil {
		return appliedAnswer{}, fmt.Errorf("node %d unreachable: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return appliedAnswer{}, fmt.Errorf("node %d answered %d to %s", id, resp.StatusCode, appliedRoute)
	}
	var ans appliedAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ans); err != nil {
		return appliedAnswer{}, fmt.Errorf("node %d applied indexes: %w", id, err)
	}
	return ans, nil
}
