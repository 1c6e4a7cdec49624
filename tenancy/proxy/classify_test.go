package proxy

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/queen-mq/queen/http/api"
)

// brokerRouteClasses is the class of every route the broker registers,
// as spec §6.7's rules give it. A route the broker gains without a line
// here fails TestEveryBrokerRouteIsClassified: someone must decide who
// may use it through the proxy.
var brokerRouteClasses = map[string]string{
	"GET /health":                   "read",
	"GET /":                         "read",
	"GET /assets/{path:*}":          "read",
	"GET /metrics":                  "blocked",
	"GET /metrics/prometheus":       "operator",
	"POST /api/v1/push":             "produce",
	"GET /api/v1/pop/queue/{queue}": "consume",
	"GET /api/v1/pop/queue/{queue}/partition/{partition}": "consume",
	"GET /api/v1/pop":                                                                 "blocked",
	"POST /api/v1/ack":                                                                "consume",
	"POST /api/v1/ack/batch":                                                          "consume",
	"POST /api/v1/lease/{leaseId}/extend":                                             "consume",
	"POST /api/v1/transaction":                                                        "produce",
	"POST /api/v1/configure":                                                          "queue admin",
	"POST /api/v1/fetch":                                                              "consume",
	"POST /api/v1/kv":                                                                 "gated kv mixed",
	"GET /api/v1/kv/{ns}/{key:*}":                                                     "gated kv read",
	"PUT /api/v1/kv/{ns}/{key:*}":                                                     "gated kv grow",
	"DELETE /api/v1/kv/{ns}/{key:*}":                                                  "gated kv delete",
	"GET /api/v1/resources/kv/namespaces":                                             "read",
	"POST /api/v1/resources/kv/list":                                                  "read",
	"POST /api/v1/locks":                                                              "blocked",
	"POST /api/v1/timers":                                                             "gated timers mixed",
	"GET /api/v1/timers/{queue}":                                                      "gated timers read",
	"GET /api/v1/timers/{queue}/{timerKey:*}":                                         "gated timers read",
	"DELETE /api/v1/timers/{queue}/{timerKey:*}":                                      "gated timers delete",
	"GET /streams/v1/queries":                                                         "gated streams read",
	"POST /streams/v1/queries":                                                        "gated streams open",
	"POST /streams/v1/state/get":                                                      "gated streams open",
	"POST /streams/v1/cycle":                                                          "gated streams mixed",
	"POST /api/v1/traces":                                                             "gated traces open",
	"GET /api/v1/traces/names":                                                        "read",
	"GET /api/v1/traces/by-name/{name}":                                               "read",
	"GET /api/v1/traces/{partitionId}/{transactionId}":                                "read",
	"GET /api/v1/resources/queues":                                                    "read",
	"GET /api/v1/resources/topics/{topic}":                                            "read",
	"GET /api/v1/resources/queues/{queue}":                                            "read",
	"DELETE /api/v1/resources/queues/{queue}":                                         "queue admin",
	"GET /api/v1/resources/queues/{queue}/depth":                                      "read",
	"GET /api/v1/resources/queues/{queue}/sizes":                                      "read",
	"GET /api/v1/resources/partitions":                                                "read",
	"GET /api/v1/resources/overview":                                                  "read",
	"GET /api/v1/resources/namespaces":                                                "read",
	"GET /api/v1/resources/tasks":                                                     "read",
	"GET /api/v1/resources/transactions":                                              "read",
	"GET /api/v1/system/placement":                                                    "blocked",
	"GET /api/v1/system/partitions/moves":                                             "blocked",
	"POST /api/v1/system/partitions/moves":                                            "blocked",
	"GET /api/v1/system/raft/membership":                                              "blocked",
	"POST /api/v1/system/raft/membership/learners":                                    "blocked",
	"POST /api/v1/system/raft/membership/promote":                                     "blocked",
	"POST /api/v1/system/standby/promote":                                             "blocked",
	"PUT /api/v1/system/raft/membership/voters":                                       "blocked",
	"DELETE /api/v1/system/raft/membership/members/{id}":                              "blocked",
	"GET /status":                                                                     "blocked",
	"GET /api/v1/status":                                                              "operator",
	"GET /api/v1/status/queues":                                                       "read",
	"GET /api/v1/status/queues/{queue}":                                               "read",
	"GET /api/v1/status/analytics":                                                    "read",
	"GET /api/v1/analytics/system-metrics":                                            "operator",
	"GET /api/v1/analytics/worker-metrics":                                            "operator",
	"GET /api/v1/analytics/queue-lag":                                                 "read",
	"GET /api/v1/analytics/queue-ops":                                                 "read",
	"GET /api/v1/analytics/workload":                                                  "read",
	"GET /api/v1/analytics/queue-parked-replicas":                                     "read",
	"GET /api/v1/analytics/retention":                                                 "read",
	"GET /api/v1/analytics/dlq-signatures":                                            "read",
	"GET /api/v1/analytics/partition-liveness":                                        "read",
	"POST /api/v1/stats/refresh":                                                      "blocked",
	"GET /api/v1/messages":                                                            "read",
	"GET /api/v1/messages/{partitionId}/{transactionId}":                              "read",
	"DELETE /api/v1/messages/{partitionId}/{transactionId}":                           "queue admin",
	"POST /api/v1/messages/{partitionId}/{transactionId}/retry":                       "queue admin",
	"GET /api/v1/dlq":                                                                 "read",
	"DELETE /api/v1/dlq":                                                              "queue admin",
	"POST /api/v1/dlq/{id}/replay":                                                    "queue admin",
	"GET /api/v1/consumer-groups":                                                     "read",
	"GET /api/v1/consumer-groups/lagging":                                             "read",
	"POST /api/v1/consumer-groups/positions":                                          "queue admin",
	"GET /api/v1/consumer-groups/{group}":                                             "read",
	"GET /api/v1/consumer-groups/{group}/members":                                     "read",
	"DELETE /api/v1/consumer-groups/{group}":                                          "queue admin",
	"POST /api/v1/consumer-groups/{group}/subscription":                               "queue admin",
	"DELETE /api/v1/consumer-groups/{group}/queues/{queue}":                           "queue admin",
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek":                        "queue admin",
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek": "queue admin",
	"POST /api/v1/fetch/offsets":                                                      "blocked",
	"POST /api/v1/partitions/changed":                                                 "consume",
	"POST /api/v1/ephemeral/push":                                                     "gated ephemeral grow",
	"GET /api/v1/ephemeral/pop":                                                       "gated ephemeral open",
	"POST /api/v1/ephemeral/ack":                                                      "gated ephemeral open",
	"POST /api/v1/ephemeral/configure":                                                "gated ephemeral open",
	"POST /api/v1/ephemeral/reset":                                                    "gated ephemeral open",
	"DELETE /api/v1/ephemeral/queue/{queue}":                                          "gated ephemeral open",
	"GET /api/v1/ephemeral/queues":                                                    "gated ephemeral read",
	"GET /api/v1/ephemeral/queues/{queue}/depth":                                      "gated ephemeral read",
	"GET /api/v1/system/ephemeral":                                                    "blocked",
	"POST /api/v1/system/ephemeral":                                                   "blocked",
	"GET /api/v1/system/quota":                                                        "blocked",
	"POST /api/v1/system/quota":                                                       "blocked",
	// ACL admin: the cluster's own ACLs, as Kafka's Describe/Create/DeleteAcls
	// (docs/proxy.md "ACLs behind the proxy").
	"GET /api/v1/system/acls":                    "acl describe",
	"POST /api/v1/system/acls":                   "acl alter",
	"DELETE /api/v1/system/acls":                 "acl alter",
	"GET /api/v1/system/maintenance":             "operator",
	"POST /api/v1/system/maintenance":            "operator",
	"GET /api/v1/system/maintenance/pop":         "operator",
	"POST /api/v1/system/maintenance/pop":        "operator",
	"GET /api/v1/system/shared-state":            "blocked",
	"GET /api/v1/status/buffers":                 "operator",
	"GET /api/v1/status/queues/{queue}/messages": "read",
	"GET /api/v1/analytics/postgres-stats":       "operator",
}

var routeParam = regexp.MustCompile(`\{[a-zA-Z]+(:\*)?\}`)

// concrete turns a router pattern into a path a client could send.
func concrete(pattern string) string {
	return routeParam.ReplaceAllStringFunc(pattern, func(p string) string {
		if strings.HasSuffix(p, ":*}") {
			return "a/b"
		}
		return "x1"
	})
}

func (r Route) String() string {
	if r.Class != ClassGated {
		return r.Class.String()
	}
	return fmt.Sprintf("gated %s %s", r.Feature, [...]string{"", "read", "grow", "mixed", "open", "delete"}[r.Op])
}

func TestEveryBrokerRouteIsClassified(t *testing.T) {
	seen := map[string]bool{}
	reachable := 0
	for _, rt := range api.Routes() {
		name := rt.Method + " " + rt.Path
		seen[name] = true
		want, ok := brokerRouteClasses[name]
		if !ok {
			t.Errorf("broker route %s has no class in brokerRouteClasses: decide who may use it through the proxy", name)
			continue
		}
		if got := Classify(rt.Method, concrete(rt.Path)).String(); got != want {
			t.Errorf("%s: class %q, want %q", name, got, want)
		}
		if want != "blocked" && want != "operator" {
			reachable++
		}
	}
	for name := range brokerRouteClasses {
		if !seen[name] {
			t.Errorf("brokerRouteClasses lists %s, which the broker does not register", name)
		}
	}
	t.Logf("%d of the broker's %d method+path pairs are reachable with a tenant credential", reachable, len(seen))
}

// TestClassifierFailsClosed covers the rules' edges: other methods,
// trailing slashes, segment counts, and API-shaped paths no rule names.
func TestClassifierFailsClosed(t *testing.T) {
	cases := []struct{ method, path, want string }{
		{"GET", "/api/v1/fetch", "blocked"},
		{"POST", "/api/v1/fetch/", "blocked"},
		{"POST", "/api/v1/partitions/changed/", "blocked"},
		{"GET", "/api/v1/pop/", "blocked"},
		{"GET", "/api/v1/systemx", "blocked"},
		{"GET", "/internal/anything", "blocked"},
		{"POST", "/api/v1/migration/start", "blocked"},
		{"GET", "/api/v1/messages/p/t/retry", "blocked"},
		{"POST", "/api/v1/messages/p/retry", "blocked"},
		{"POST", "/api/v1/messages//t/retry", "blocked"},
		{"GET", "/api/v1/dlq/7/replay", "blocked"},
		{"POST", "/api/v1/dlq/7/8/replay", "blocked"},
		{"GET", "/api/v1/dlq/7", "blocked"},
		{"PUT", "/api/v1/consumer-groups/g", "blocked"},
		{"GET", "/api/v1/kv", "blocked"},
		{"POST", "/api/v1/kv/", "gated kv mixed"},
		{"POST", "/api/v1/kv/ns/k", "blocked"},
		{"PUT", "/api/v1/timers/q/k", "blocked"},
		{"GET", "/api/v1/timers", "blocked"},
		{"POST", "/api/v1/ephemeral/pop", "blocked"},
		{"GET", "/api/v1/ephemeral/queues/q", "blocked"},
		{"DELETE", "/api/v1/ephemeral/queue/", "blocked"},
		{"POST", "/streams/v1/cycle", "gated streams mixed"},
		{"GET", "/streams/v1/state", "gated streams read"},
		{"PUT", "/api/v1/messages", "blocked"},
		{"HEAD", "/api/v1/messages/p/t", "read"},
		{"GET", "/api/v2/anything", "blocked"},
		{"GET", "/api", "blocked"},
		{"GET", "/api/v1/status/buffers", "operator"},
		{"GET", "/api/v1/analytics/postgres-stats", "operator"},
		{"POST", "/api/v1/system/maintenance", "operator"},
		{"GET", "/index.html", "read"},
		{"HEAD", "/api/v1/system/acls", "acl describe"},
		{"PUT", "/api/v1/system/acls", "blocked"},
		{"PATCH", "/api/v1/system/acls", "blocked"},
		{"GET", "/api/v1/system/acls/", "blocked"},
		{"POST", "/api/v1/system/acls/x", "blocked"},
		{"GET", "/api/v1/system/aclsx", "blocked"},
		{"GET", "/api/v1/system/quota", "blocked"},
	}
	for _, c := range cases {
		if got := Classify(c.method, c.path).String(); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

func TestScopesGrantClasses(t *testing.T) {
	cases := []struct {
		route  Route
		scopes []string
		want   bool
	}{
		{class(ClassProduce), []string{ScopeProduce}, true},
		{class(ClassProduce), []string{ScopeConsume, ScopeRead}, false},
		{class(ClassProduce), []string{ScopeAdmin}, true},
		{class(ClassConsume), []string{ScopeConsume}, true},
		{class(ClassConsume), []string{ScopeProduce}, false},
		{class(ClassQueueAdmin), []string{ScopeProduce, ScopeConsume, ScopeRead}, false},
		{class(ClassQueueAdmin), []string{ScopeAdmin}, true},
		{class(ClassRead), []string{ScopeProduce}, false},
		{class(ClassRead), []string{ScopeRead}, true},
		{class(ClassBlocked), AllScopes, false},
		{class(ClassOperator), AllScopes, false},
		{gated(FeatureKV, OpRead), []string{ScopeRead}, true},
		{gated(FeatureKV, OpRead), []string{ScopeProduce}, false},
		{gated(FeatureKV, OpGrow), []string{ScopeConsume}, false},
		{gated(FeatureKV, OpGrow), []string{ScopeProduce}, true},
		{gated(FeatureEphemeral, OpOpen), []string{ScopeConsume}, true},
		{gated(FeatureEphemeral, OpOpen), []string{ScopeRead}, false},
		{gated(FeatureKV, OpDelete), []string{ScopeProduce, ScopeConsume, ScopeRead}, false},
		{gated(FeatureTimers, OpDelete), []string{ScopeAdmin}, true},
		// The ACL routes need what the Kafka door's DescribeAcls and
		// Create/DeleteAcls need of a key (kafka.go's scopeLimits): any
		// scope to describe, admin to change.
		{class(ClassACLDescribe), []string{ScopeProduce}, true},
		{class(ClassACLDescribe), []string{ScopeConsume}, true},
		{class(ClassACLDescribe), []string{ScopeRead}, true},
		{class(ClassACLDescribe), []string{ScopeAdmin}, true},
		{class(ClassACLAlter), []string{ScopeProduce, ScopeConsume, ScopeRead}, false},
		{class(ClassACLAlter), []string{ScopeAdmin}, true},
	}
	for _, c := range cases {
		if got := c.route.allowedFor(c.scopes); got != c.want {
			t.Errorf("%s with %v: %v, want %v", c.route, c.scopes, got, c.want)
		}
	}
}

func TestMeterOps(t *testing.T) {
	for path, want := range map[string]string{"/api/v1/push": "push", "/api/v1/transaction": "txn", "/api/v1/configure": "configure",
		"/api/v1/pop/queue/q": "delivery", "/api/v1/ack": "read", "/api/v1/fetch": "read", "/api/v1/system/acls": "read"} {
		if got := meterOp(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

func TestMixedBatches(t *testing.T) {
	kv := gated(FeatureKV, OpMixed)
	cases := []struct {
		route Route
		body  string
		want  string
		grows bool
	}{
		{kv, `{"operations":[{"op":"get","ns":"app","key":"a"}]}`, "gated kv mixed", false},
		{kv, `{"operations":[{"op":"get","ns":"app","key":"a"},{"op":"put","ns":"app","key":"b","value":1}]}`, "gated kv mixed", true},
		{kv, `{"operations":[{"op":"put","ns":"queen-kafka","key":"qk:g1","value":1},{"op":"get","ns":"queen-kafka","key":"qk:g2"}]}`, "consume", false},
		{kv, `{"operations":[{"op":"put","ns":"queen-kafka","key":"other","value":1}]}`, "gated kv mixed", true},
		{gated(FeatureTimers, OpMixed), `{"operations":[{"op":"cancel","queue":"q","key":"k"}]}`, "gated timers mixed", false},
		{gated(FeatureTimers, OpMixed), `{"operations":[{"op":"schedule","queue":"q","key":"k"}]}`, "gated timers mixed", true},
		{kv, `not json`, "gated kv mixed", true},
		{class(ClassProduce), `{}`, "produce", false},
	}
	for _, c := range cases {
		ops, _ := bodyRoutes("/api/v1/x", c.route, []byte(c.body))
		got, grows := refineMixed(c.route, []byte(c.body), ops)
		if got.String() != c.want || grows != c.grows {
			t.Errorf("%s: %s grows=%v, want %s grows=%v", c.body, got, grows, c.want, c.grows)
		}
	}
}
