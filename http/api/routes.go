package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/authn"
)

// route is one method+path with the access level it requires (spec §2.2).
// Every route is in routes(): a route cannot exist without a level.
type route struct {
	method string
	path   string
	level  authn.Level
	handle func(*fasthttp.RequestCtx) error
}

const (
	get  = http.MethodGet
	post = http.MethodPost
	put  = http.MethodPut
	del  = http.MethodDelete
)

// routes is the whole HTTP API: the core routes below, then the Streams
// routes (streams_routes.go) and the routes Queen's SDKs and queenctl call
// beyond them (sdk_routes.go), each kept in its own file.
func (s *Server) routes() []route {
	all := s.coreRoutes()
	all = append(all, s.streamsRoutes()...)
	return append(all, s.sdkRoutes()...)
}

// coreRoutes are the data plane, resources, status and system routes.
func (s *Server) coreRoutes() []route {
	return []route{
		{get, "/health", authn.LevelPublic, s.health},
		{get, "/metrics", authn.LevelPublic, s.metricsJSON},
		{get, "/metrics/prometheus", authn.LevelPublic, s.metricsPrometheus},
		{get, "/", authn.LevelPublic, s.dashboard},
		{get, "/assets/{path:*}", authn.LevelPublic, s.dashboardAsset},

		// Data plane, spec §2.3 routes 1-12.
		{post, "/api/v1/push", authn.LevelWriteOnly, s.push},
		{get, "/api/v1/pop/queue/{queue}", authn.LevelReadWrite, s.popQueue},
		{get, "/api/v1/pop/queue/{queue}/partition/{partition}", authn.LevelReadWrite, s.popPartition},
		{get, "/api/v1/pop", authn.LevelReadWrite, s.popDiscover},
		{post, "/api/v1/ack", authn.LevelReadWrite, s.ack},
		{post, "/api/v1/ack/batch", authn.LevelReadWrite, s.ackBatch},
		{post, "/api/v1/lease/{leaseId}/extend", authn.LevelReadWrite, s.leaseExtend},
		{post, "/api/v1/transaction", authn.LevelReadWrite, s.transaction},
		{post, "/api/v1/configure", authn.LevelReadWrite, s.configure},
		{post, "/api/v1/fetch", authn.LevelReadOnly, s.fetch},

		{post, "/api/v1/kv", authn.LevelReadWrite, s.kv},
		{get, "/api/v1/kv/{ns}/{key:*}", authn.LevelReadOnly, s.kvGet},
		{put, "/api/v1/kv/{ns}/{key:*}", authn.LevelReadWrite, s.kvPut},
		{del, "/api/v1/kv/{ns}/{key:*}", authn.LevelReadWrite, s.kvDelete},
		{get, "/api/v1/resources/kv/namespaces", authn.LevelReadOnly, s.kvNamespaces},
		{post, "/api/v1/resources/kv/list", authn.LevelReadOnly, s.kvList},
		{post, "/api/v1/locks", authn.LevelReadWrite, s.locks},
		{post, "/api/v1/timers", authn.LevelWriteOnly, s.timers},
		{get, "/api/v1/timers/{queue}", authn.LevelReadOnly, s.timersList},
		{get, "/api/v1/timers/{queue}/{timerKey:*}", authn.LevelReadOnly, s.timerPeek},
		{del, "/api/v1/timers/{queue}/{timerKey:*}", authn.LevelReadWrite, s.timerCancel},
		{post, "/api/v1/traces", authn.LevelReadWrite, s.traceAdd},
		{get, "/api/v1/traces/names", authn.LevelReadOnly, s.traceNames},
		{get, "/api/v1/traces/by-name/{name}", authn.LevelReadOnly, s.tracesByName},
		{get, "/api/v1/traces/{partitionId}/{transactionId}", authn.LevelReadOnly, s.tracesOfMessage},
		{get, "/api/v1/resources/queues", authn.LevelReadOnly, s.listQueues},
		{get, "/api/v1/resources/queues/{queue}", authn.LevelReadOnly, s.getQueue},
		{del, "/api/v1/resources/queues/{queue}", authn.LevelAdmin, s.deleteQueue},
		{get, "/api/v1/resources/queues/{queue}/depth", authn.LevelReadOnly, s.queueDepth},
		{get, "/api/v1/resources/queues/{queue}/sizes", authn.LevelReadOnly, s.queueSizes},
		{get, "/api/v1/resources/partitions", authn.LevelReadOnly, s.listPartitions},
		{get, "/api/v1/resources/overview", authn.LevelReadOnly, s.overview},
		{get, "/api/v1/resources/namespaces", authn.LevelReadOnly, s.listNamespaces},
		{get, "/api/v1/resources/tasks", authn.LevelReadOnly, s.listTasks},
		{get, "/api/v1/resources/topics/{topic}", authn.LevelReadOnly, s.getTopic},
		{get, "/api/v1/resources/transactions", authn.LevelReadOnly, s.openTransactions},
		{get, "/api/v1/system/placement", authn.LevelReadOnly, s.placement},
		{get, "/api/v1/system/partitions/moves", authn.LevelAdmin, s.moves},
		{post, "/api/v1/system/partitions/moves", authn.LevelAdmin, s.startMove},
		{get, "/api/v1/system/raft/membership", authn.LevelAdmin, s.membershipGet},
		{post, "/api/v1/system/raft/membership/learners", authn.LevelAdmin, s.membershipLearner},
		{post, "/api/v1/system/raft/membership/promote", authn.LevelAdmin, s.membershipPromote},
		{put, "/api/v1/system/raft/membership/voters", authn.LevelAdmin, s.membershipVoters},
		{del, "/api/v1/system/raft/membership/members/{id}", authn.LevelAdmin, s.membershipRemove},
		{post, "/api/v1/system/standby/promote", authn.LevelAdmin, s.standbyPromote},

		{get, "/status", authn.LevelReadOnly, s.status},
		{get, "/api/v1/status", authn.LevelReadOnly, s.status},
		{get, "/api/v1/status/queues", authn.LevelReadOnly, s.statusQueues},
		{get, "/api/v1/status/queues/{queue}", authn.LevelReadOnly, s.statusQueue},
		{get, "/api/v1/status/analytics", authn.LevelReadOnly, s.statusAnalytics},
		{get, "/api/v1/analytics/system-metrics", authn.LevelReadOnly, s.systemMetrics},
		{get, "/api/v1/analytics/worker-metrics", authn.LevelReadOnly, s.workerMetrics},
		{get, "/api/v1/analytics/queue-lag", authn.LevelReadOnly, s.queueLagRoute},
		{get, "/api/v1/analytics/queue-ops", authn.LevelReadOnly, s.queueOps},
		{get, "/api/v1/analytics/workload", authn.LevelReadOnly, s.workload},
		{get, "/api/v1/analytics/queue-parked-replicas", authn.LevelReadOnly, s.parkedReplicas},
		{get, "/api/v1/analytics/retention", authn.LevelReadOnly, s.retention},
		{get, "/api/v1/analytics/dlq-signatures", authn.LevelReadOnly, s.dlqSignaturesRoute},
		{get, "/api/v1/analytics/partition-liveness", authn.LevelReadOnly, s.partitionLiveness},
		{post, "/api/v1/stats/refresh", authn.LevelAdmin, s.statsRefresh},

		{get, "/api/v1/messages", authn.LevelReadOnly, s.listMessages},
		{get, "/api/v1/messages/{partitionId}/{transactionId}", authn.LevelReadOnly, s.getMessage},
		{del, "/api/v1/messages/{partitionId}/{transactionId}", authn.LevelReadWrite, s.deleteMessage},
		{post, "/api/v1/messages/{partitionId}/{transactionId}/retry", authn.LevelReadWrite, s.retryMessage},
		{get, "/api/v1/dlq", authn.LevelReadOnly, s.listDLQ},
		{del, "/api/v1/dlq", authn.LevelAdmin, s.purgeDLQ},
		{post, "/api/v1/dlq/{id}/replay", authn.LevelReadWrite, s.replayDLQ},

		{get, "/api/v1/consumer-groups", authn.LevelReadOnly, s.listGroups},
		{get, "/api/v1/consumer-groups/lagging", authn.LevelReadOnly, s.laggingGroups},
		{post, "/api/v1/consumer-groups/positions", authn.LevelReadWrite, s.positions},
		{get, "/api/v1/consumer-groups/{group}", authn.LevelReadOnly, s.groupDetail},
		{get, "/api/v1/consumer-groups/{group}/members", authn.LevelReadOnly, s.groupMembers},
		{del, "/api/v1/consumer-groups/{group}", authn.LevelAdmin, s.deleteGroup},
		{post, "/api/v1/consumer-groups/{group}/subscription", authn.LevelReadWrite, s.groupSubscription},
		{del, "/api/v1/consumer-groups/{group}/queues/{queue}", authn.LevelAdmin, s.deleteGroup},
		{post, "/api/v1/consumer-groups/{group}/queues/{queue}/seek", authn.LevelReadWrite, s.seekGroup},
		{post, "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", authn.LevelReadWrite, s.seekGroup},
		{post, "/api/v1/fetch/offsets", authn.LevelReadOnly, s.fetchOffsets},
		{post, "/api/v1/partitions/changed", authn.LevelReadOnly, s.partitionsChanged},

		// Ephemeral queues, spec §2.3 routes 70-84. The node-to-node routes
		// 78-80 (_adopt, _leaving, _ready) are served on the node channel
		// only (node.go).
		{post, "/api/v1/ephemeral/push", authn.LevelWriteOnly, s.ephPush},
		{get, "/api/v1/ephemeral/pop", authn.LevelReadWrite, s.ephPop},
		{post, "/api/v1/ephemeral/ack", authn.LevelReadWrite, s.ephAckHandler},
		{post, "/api/v1/ephemeral/configure", authn.LevelReadWrite, s.ephConfigure},
		{post, "/api/v1/ephemeral/reset", authn.LevelReadWrite, s.ephReset},
		{del, "/api/v1/ephemeral/queue/{queue}", authn.LevelReadWrite, s.ephDelete},
		{get, "/api/v1/ephemeral/queues", authn.LevelReadOnly, s.ephQueues},
		{get, "/api/v1/ephemeral/queues/{queue}/depth", authn.LevelReadOnly, s.ephDepth},
		{get, "/api/v1/system/ephemeral", authn.LevelAdmin, s.ephSystemGet},
		{post, "/api/v1/system/ephemeral", authn.LevelAdmin, s.ephSystemSet},
		{get, "/api/v1/system/quota", authn.LevelAdmin, s.quotaGet},
		{post, "/api/v1/system/quota", authn.LevelAdmin, s.quotaSet},

		// ACL admin (acl_admin.go): the tenant's own, not the operator's.
		{get, aclsPath, authn.LevelAdmin, s.aclsGet},
		{post, aclsPath, authn.LevelAdmin, s.aclsPost},
		{del, aclsPath, authn.LevelAdmin, s.aclsDelete},
	}
}

// RouteInfo is one route of the API as the embedded proxy's classifier
// sees it: a method and the router's path pattern.
type RouteInfo struct {
	Method string
	Path   string
}

// Routes lists every route the API registers, so the proxy's tests can
// prove each one is classified.
func Routes() []RouteInfo {
	var out []RouteInfo
	for _, rt := range (&Server{}).routes() {
		out = append(out, RouteInfo{rt.method, rt.path})
	}
	return out
}

// wrap turns a route's handler into a fasthttp handler: the request is
// authorized (its level, an operator route's operator, then with
// QUEEN_ACLS its line of the ACL table, acl_routes.go), errors become
// the error envelope, a panic becomes a 500 for that request only, and every
// request is counted and timed per route.
func (s *Server) wrap(rt route) fasthttp.RequestHandler {
	m := newRouteMetrics(s.metrics, "queen_http", rt)
	operator := operatorRoute(rt.path)
	acls := aclRuleOf(rt.method, rt.path)
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("http: handler panic", "route", rt.path, "panic", fmt.Sprint(v))
				writeJSON(ctx, http.StatusInternalServerError, errorBody{Error: "internal error", Code: "internal"})
			}
			m.observe(ctx.Response.StatusCode(), start)
			s.requests.Add(1)
		}()
		if !s.authorize(ctx, rt.level) || operator && !s.authorizeOperator(ctx) {
			closeIfBodyUnread(ctx)
			return
		}
		held, err := s.readBody(ctx)
		defer s.bodies.give(held)
		if err != nil {
			refuseBody(ctx, err)
			return
		}
		if s.acl != nil {
			if err := s.aclRoute(ctx, &acls); err != nil {
				writeError(ctx, err)
				return
			}
		}
		if err := rt.handle(ctx); err != nil {
			writeError(ctx, err)
		}
	}
}
