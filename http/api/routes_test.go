package api

import (
	"testing"

	"github.com/queen-mq/queen/crypto/authn"
)

// publicRoutes are the only routes anyone may call without a token (spec
// §2.2). A route added without an access level gets the zero level,
// public, and fails this test.
var publicRoutes = map[string]bool{
	"GET /health":             true,
	"GET /metrics":            true,
	"GET /metrics/prometheus": true,
	"GET /":                   true,
	"GET /assets/{path:*}":    true, // the dashboard's files (spec §2.2: /assets/* is public)
	// The node-to-node ephemeral routes are on the node channel only
	// (node.go), behind the raft token: not here.
}

func TestEveryRouteHasAnAccessLevel(t *testing.T) {
	s := &Server{}
	seen := map[string]bool{}
	for _, rt := range s.routes() {
		key := rt.method + " " + rt.path
		if seen[key] {
			t.Errorf("%s is routed twice", key)
		}
		seen[key] = true
		if rt.level == authn.LevelPublic && !publicRoutes[key] {
			t.Errorf("%s has no access level (it would be public)", key)
		}
		if rt.level != authn.LevelPublic && publicRoutes[key] {
			t.Errorf("%s must be public", key)
		}
		if rt.handle == nil {
			t.Errorf("%s has no handler", key)
		}
	}
}

// Spot checks of the level table against spec §2.2.
func TestRouteLevelsFollowTheSpec(t *testing.T) {
	want := map[string]authn.Level{
		"POST /api/v1/push":                          authn.LevelWriteOnly,
		"GET /api/v1/pop/queue/{queue}":              authn.LevelReadWrite,
		"POST /api/v1/ack":                           authn.LevelReadWrite,
		"POST /api/v1/fetch":                         authn.LevelReadOnly,
		"POST /api/v1/kv":                            authn.LevelReadWrite,
		"GET /api/v1/kv/{ns}/{key:*}":                authn.LevelReadOnly,
		"POST /api/v1/timers":                        authn.LevelWriteOnly,
		"POST /api/v1/resources/kv/list":             authn.LevelReadOnly,
		"GET /api/v1/traces/names":                   authn.LevelReadOnly,
		"DELETE /api/v1/timers/{queue}/{timerKey:*}": authn.LevelReadWrite,
		"POST /api/v1/ephemeral/push":                authn.LevelWriteOnly,
		"GET /api/v1/ephemeral/pop":                  authn.LevelReadWrite,
		"GET /api/v1/ephemeral/queues":               authn.LevelReadOnly,
		"POST /api/v1/system/ephemeral":              authn.LevelAdmin,
	}
	s := &Server{}
	for _, rt := range s.routes() {
		if l, ok := want[rt.method+" "+rt.path]; ok && l != rt.level {
			t.Errorf("%s %s: level %v, spec says %v", rt.method, rt.path, rt.level, l)
		}
	}
}
