package api

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// The HTTP door's operation table (docs/security.md "ACLs on the HTTP
// door"): for each route, what it must be allowed, on what. wrap checks
// the checks of a route's rule before its handler runs (after the JWT
// level, which stays a ceiling); a route whose body names its queues one
// by one (push, ack, transaction, fetch, positions, timers) checks them in
// its handler instead (acl.go), and a listing shows only what the
// principal may DESCRIBE (queueViews, listGroups). TestACLTableCoversEveryRoute
// proves no route is missing: a route with no rule is refused.

// nameFrom is where a check finds the resource's name.
type nameFrom uint8

const (
	fromCluster       nameFrom = iota // the cluster resource, kafka-cluster
	fromPathQueue                     // the {queue} path parameter
	fromPathTopic                     // the {topic} path parameter
	fromPathGroup                     // the {group} path parameter
	fromQueryGroup                    // ?consumerGroup=, default the queue-mode group
	fromQueryQueue                    // ?queue= (ephemeral pop)
	fromQueryEphGroup                 // ?group=, default the queue-mode group (ephemeral pop)
	fromBodyQueue                     // the body's "queue"
	fromBodyEphGroup                  // the body's "group", default the queue-mode group
	fromPathPartition                 // the queue of the {partitionId} path parameter
)

// aclCheckSpec is one check: op on the resource named from where.
// createOrAlter is configure's: CREATE when the queue does not exist yet,
// ALTER_CONFIGS when it does.
type aclCheckSpec struct {
	res           acl.ResourceType
	op            acl.Operation
	from          nameFrom
	createOrAlter bool
}

// aclRule is a route's line of the table.
type aclRule struct {
	checks []aclCheckSpec
	// inHandler: the handler checks what its body names, or filters what
	// it lists; wrap checks nothing more.
	inHandler bool
	// public routes need no permission.
	public bool
}

func topic(op acl.Operation, from nameFrom) aclCheckSpec {
	return aclCheckSpec{res: acl.ResourceTopic, op: op, from: from}
}
func group(op acl.Operation, from nameFrom) aclCheckSpec {
	return aclCheckSpec{res: acl.ResourceGroup, op: op, from: from}
}
func cluster(op acl.Operation) aclCheckSpec { return aclCheckSpec{res: acl.ResourceCluster, op: op} }
func checks(c ...aclCheckSpec) aclRule      { return aclRule{checks: c} }

var (
	aclPublic    = aclRule{public: true}
	aclInHandler = aclRule{inHandler: true}
	// Views over many queues (or none) are the cluster's: DESCRIBE on it.
	clusterDescribe = checks(cluster(acl.OpDescribe))
	clusterAlter    = checks(cluster(acl.OpAlter))
	// KV, locks, traces and Streams' state name no queue: READ and WRITE
	// on the cluster resource, operations Kafka never checks there, so
	// granting them grants nothing on the Kafka door.
	clusterRead  = checks(cluster(acl.OpRead))
	clusterWrite = checks(cluster(acl.OpWrite))
	// aclRefuseAll is the rule of a route the table misses.
	aclRefuseAll = checks(aclCheckSpec{res: acl.ResourceCluster, op: acl.OpAll, from: fromCluster})
)

// aclRules is the table, by "METHOD path" as routes() registers them.
var aclRules = map[string]aclRule{
	"GET /health":             aclPublic,
	"GET /metrics":            aclPublic,
	"GET /metrics/prometheus": aclPublic,
	"GET /":                   aclPublic,
	"GET /assets/{path:*}":    aclPublic,

	"POST /api/v1/push":             aclInHandler, // WRITE on each item's queue
	"GET /api/v1/pop/queue/{queue}": checks(topic(acl.OpRead, fromPathQueue), group(acl.OpRead, fromQueryGroup)),
	"GET /api/v1/pop/queue/{queue}/partition/{partition}": checks(topic(acl.OpRead, fromPathQueue),
		group(acl.OpRead, fromQueryGroup)),
	// READ on the group here; the queues tried are those the principal may READ.
	"GET /api/v1/pop":        checks(group(acl.OpRead, fromQueryGroup)),
	"POST /api/v1/ack":       aclInHandler, // READ on the partition's queue and the group
	"POST /api/v1/ack/batch": aclInHandler,
	// A lease id is issued by a pop that was allowed READ on the queue and
	// group; it names neither, and the lease index is the apply loop's, so
	// extending (which only delays a redelivery) needs the level only.
	"POST /api/v1/lease/{leaseId}/extend": aclPublic,
	"POST /api/v1/transaction":            aclInHandler, // each operation as its route
	"POST /api/v1/configure":              checks(aclCheckSpec{res: acl.ResourceTopic, from: fromBodyQueue, createOrAlter: true}),
	"POST /api/v1/fetch":                  aclInHandler, // READ on each entry's queue

	"POST /api/v1/kv":                                  clusterWrite,
	"GET /api/v1/kv/{ns}/{key:*}":                      clusterRead,
	"PUT /api/v1/kv/{ns}/{key:*}":                      clusterWrite,
	"DELETE /api/v1/kv/{ns}/{key:*}":                   clusterWrite,
	"GET /api/v1/resources/kv/namespaces":              clusterRead,
	"POST /api/v1/resources/kv/list":                   clusterRead,
	"POST /api/v1/locks":                               clusterWrite,
	"POST /api/v1/timers":                              aclInHandler, // WRITE on each timer's queue
	"GET /api/v1/timers/{queue}":                       checks(topic(acl.OpDescribe, fromPathQueue)),
	"GET /api/v1/timers/{queue}/{timerKey:*}":          checks(topic(acl.OpDescribe, fromPathQueue)),
	"DELETE /api/v1/timers/{queue}/{timerKey:*}":       checks(topic(acl.OpWrite, fromPathQueue)),
	"POST /api/v1/traces":                              clusterWrite,
	"GET /api/v1/traces/names":                         clusterRead,
	"GET /api/v1/traces/by-name/{name}":                clusterRead,
	"GET /api/v1/traces/{partitionId}/{transactionId}": clusterRead,

	"GET /api/v1/resources/queues":                       aclInHandler, // listing: DESCRIBE filters
	"GET /api/v1/resources/queues/{queue}":               checks(topic(acl.OpDescribe, fromPathQueue)),
	"DELETE /api/v1/resources/queues/{queue}":            checks(topic(acl.OpDelete, fromPathQueue)),
	"GET /api/v1/resources/queues/{queue}/depth":         checks(topic(acl.OpDescribe, fromPathQueue)),
	"GET /api/v1/resources/queues/{queue}/sizes":         checks(topic(acl.OpDescribe, fromPathQueue)),
	"GET /api/v1/resources/partitions":                   aclInHandler,
	"GET /api/v1/resources/overview":                     clusterDescribe,
	"GET /api/v1/resources/namespaces":                   aclInHandler,
	"GET /api/v1/resources/tasks":                        aclInHandler,
	"GET /api/v1/resources/topics/{topic}":               checks(topic(acl.OpDescribe, fromPathTopic)),
	"GET /api/v1/resources/transactions":                 clusterDescribe,
	"GET /api/v1/system/placement":                       clusterDescribe,
	"GET /api/v1/system/partitions/moves":                clusterDescribe,
	"POST /api/v1/system/partitions/moves":               clusterAlter,
	"GET /api/v1/system/raft/membership":                 clusterDescribe,
	"POST /api/v1/system/raft/membership/learners":       clusterAlter,
	"POST /api/v1/system/raft/membership/promote":        clusterAlter,
	"PUT /api/v1/system/raft/membership/voters":          clusterAlter,
	"DELETE /api/v1/system/raft/membership/members/{id}": clusterAlter,

	"GET /status":                                 clusterDescribe,
	"GET /api/v1/status":                          clusterDescribe,
	"GET /api/v1/status/queues":                   aclInHandler,
	"GET /api/v1/status/queues/{queue}":           checks(topic(acl.OpDescribe, fromPathQueue)),
	"GET /api/v1/status/analytics":                clusterDescribe,
	"GET /api/v1/analytics/system-metrics":        clusterDescribe,
	"GET /api/v1/analytics/worker-metrics":        clusterDescribe,
	"GET /api/v1/analytics/queue-lag":             clusterDescribe,
	"GET /api/v1/analytics/queue-ops":             clusterDescribe,
	"GET /api/v1/analytics/workload":              clusterDescribe,
	"GET /api/v1/analytics/queue-parked-replicas": clusterDescribe,
	"GET /api/v1/analytics/retention":             clusterDescribe,
	"GET /api/v1/analytics/dlq-signatures":        clusterDescribe,
	"GET /api/v1/analytics/partition-liveness":    clusterDescribe,
	"POST /api/v1/stats/refresh":                  clusterAlter,

	"GET /api/v1/messages":                                      aclInHandler, // listing
	"GET /api/v1/messages/{partitionId}/{transactionId}":        checks(topic(acl.OpDescribe, fromPathPartition)),
	"DELETE /api/v1/messages/{partitionId}/{transactionId}":     checks(topic(acl.OpDelete, fromPathPartition)),
	"POST /api/v1/messages/{partitionId}/{transactionId}/retry": checks(topic(acl.OpWrite, fromPathPartition)),
	"GET /api/v1/dlq":              clusterDescribe,
	"DELETE /api/v1/dlq":           clusterAlter,
	"POST /api/v1/dlq/{id}/replay": clusterAlter,

	"GET /api/v1/consumer-groups":                           aclInHandler, // listing: queue and group DESCRIBE filter
	"GET /api/v1/consumer-groups/lagging":                   aclInHandler,
	"POST /api/v1/consumer-groups/positions":                aclInHandler, // READ on each queue and group
	"GET /api/v1/consumer-groups/{group}":                   checks(group(acl.OpDescribe, fromPathGroup)),
	"GET /api/v1/consumer-groups/{group}/members":           checks(group(acl.OpDescribe, fromPathGroup)),
	"DELETE /api/v1/consumer-groups/{group}":                checks(group(acl.OpDelete, fromPathGroup)),
	"POST /api/v1/consumer-groups/{group}/subscription":     checks(group(acl.OpAlter, fromPathGroup)),
	"DELETE /api/v1/consumer-groups/{group}/queues/{queue}": checks(group(acl.OpDelete, fromPathGroup)),
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek": checks(group(acl.OpAlter, fromPathGroup),
		topic(acl.OpRead, fromPathQueue)),
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek": checks(
		group(acl.OpAlter, fromPathGroup), topic(acl.OpRead, fromPathQueue)),
	"POST /api/v1/fetch/offsets":      clusterDescribe,
	"POST /api/v1/partitions/changed": clusterDescribe,

	"POST /api/v1/ephemeral/push":                checks(topic(acl.OpWrite, fromBodyQueue)),
	"GET /api/v1/ephemeral/pop":                  checks(topic(acl.OpRead, fromQueryQueue), group(acl.OpRead, fromQueryEphGroup)),
	"POST /api/v1/ephemeral/ack":                 checks(topic(acl.OpRead, fromBodyQueue), group(acl.OpRead, fromBodyEphGroup)),
	"POST /api/v1/ephemeral/configure":           checks(topic(acl.OpAlterConfigs, fromBodyQueue)),
	"POST /api/v1/ephemeral/reset":               checks(topic(acl.OpDelete, fromBodyQueue)),
	"DELETE /api/v1/ephemeral/queue/{queue}":     checks(topic(acl.OpDelete, fromPathQueue)),
	"GET /api/v1/ephemeral/queues":               clusterDescribe,
	"GET /api/v1/ephemeral/queues/{queue}/depth": checks(topic(acl.OpDescribe, fromPathQueue)),
	"GET /api/v1/system/ephemeral":               clusterDescribe,
	"POST /api/v1/system/ephemeral":              clusterAlter,
	"GET /api/v1/system/quota":                   clusterDescribe,
	"POST /api/v1/system/quota":                  clusterAlter,

	"GET /api/v1/system/maintenance":             clusterDescribe,
	"POST /api/v1/system/maintenance":            clusterAlter,
	"GET /api/v1/system/maintenance/pop":         clusterDescribe,
	"POST /api/v1/system/maintenance/pop":        clusterAlter,
	"GET /api/v1/system/shared-state":            clusterDescribe,
	"GET /api/v1/status/buffers":                 clusterDescribe,
	"GET /api/v1/status/queues/{queue}/messages": checks(topic(acl.OpDescribe, fromPathQueue)),
	"GET /api/v1/analytics/postgres-stats":       clusterDescribe,

	"GET /streams/v1/queries":    clusterRead,
	"POST /streams/v1/queries":   clusterWrite,
	"POST /streams/v1/state/get": clusterRead,
	"POST /streams/v1/cycle":     clusterWrite,

	// The ACL admin routes, as Kafka's Describe/Create/DeleteAcls.
	"GET " + aclsPath:    clusterDescribe,
	"POST " + aclsPath:   clusterAlter,
	"DELETE " + aclsPath: clusterAlter,
}

// aclRuleOf is a route's rule; a route the table misses is refused.
func aclRuleOf(method, path string) aclRule {
	if r, ok := aclRules[method+" "+path]; ok {
		return r
	}
	return aclRefuseAll
}

// aclRoute runs a route's checks: nil when allowed (or nothing to check
// here), else the refusal or why the tenant could not be read.
func (s *Server) aclRoute(ctx *fasthttp.RequestCtx, r *aclRule) error {
	if r.public || r.inHandler {
		return nil
	}
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	var body *aclBody
	for _, c := range r.checks {
		name := s.aclName(ctx, tenant, c.from, &body)
		op := c.op
		if c.createOrAlter {
			op = acl.OpCreate
			if s.engine != nil {
				if _, ok := s.engine.Catalog(tenant, name); ok {
					op = acl.OpAlterConfigs
				}
			}
		}
		if err := s.aclCheck(ctx, tenant, c.res, name, op); err != nil {
			return err
		}
	}
	return nil
}

// aclBody is what the checks read of a JSON body.
type aclBody struct {
	Queue string `json:"queue"`
	Group string `json:"group"`
}

// aclName resolves a check's resource name. A body that does not parse
// names nothing: no ACL matches the empty name, and the handler would
// refuse the body anyway.
func (s *Server) aclName(ctx *fasthttp.RequestCtx, tenant wire.ID, from nameFrom, body **aclBody) string {
	readBody := func() *aclBody {
		if *body == nil {
			*body = &aclBody{}
			_ = json.Unmarshal(ctx.PostBody(), *body)
		}
		return *body
	}
	switch from {
	case fromPathQueue:
		return pathArg(ctx, "queue")
	case fromPathTopic:
		return pathArg(ctx, "topic")
	case fromPathGroup:
		return pathArg(ctx, "group")
	case fromQueryGroup:
		return firstNonEmpty(strArg(ctx, "consumerGroup"), wire.QueueModeGroup)
	case fromQueryQueue:
		return strArg(ctx, "queue")
	case fromQueryEphGroup:
		return firstNonEmpty(strArg(ctx, "group"), ephQueueMode)
	case fromBodyQueue:
		return readBody().Queue
	case fromBodyEphGroup:
		return firstNonEmpty(readBody().Group, ephQueueMode)
	case fromPathPartition:
		var pid flexID
		if pid.UnmarshalJSON([]byte(pathArg(ctx, "partitionId"))) != nil {
			return ""
		}
		return s.queueOfPartition(tenant, uint64(pid))
	}
	return acl.ClusterName
}
