package raftgroups

import (
	"context"
	"errors"
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

// nodeRoutes holds the handler of node-to-node routes, set once the layer
// above exists; group 0's listener starts before it does.
type nodeRoutes struct{ h atomic.Pointer[http.Handler] }

func (n *nodeRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

// CallPeer makes a node-to-node call to route on peer id (see
// SetNodeHandler). It is over TLS when the node has it, carries the raft
// token, and is bounded by ctx or, without a deadline, the request
// timeout. The caller closes the body.
func (h *Host) CallPeer(ctx context.Context, id uint64, method, route string, body io.Reader) (*http.Response, error) {
	addr, ok := h.groups[0].members[id]
	if !ok {
		return nil, ErrUnknownPeer
	}
	return h.nodeClient.Do(ctx, addr, method, route, body)
}

// NodePath is the path a node route arrives with.
func NodePath(route string) string { return transport.NodePath(route) }
