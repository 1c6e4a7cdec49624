package proxy

import (
	"slices"
	"strings"
)

// Class is what a broker-bound request is, for authorization, quotas and
// metering (spec §6.4, §6.7).
type Class uint8

// Route classes. The zero class is blocked: whatever is not classified is
// refused.
const (
	ClassBlocked Class = iota
	ClassOperator
	ClassProduce
	ClassConsume
	ClassQueueAdmin
	ClassRead
	ClassGated
	// ClassACLDescribe and ClassACLAlter are the cluster's own ACLs
	// (/api/v1/system/acls): listing, and creating or deleting them. They
	// need of a key what Kafka's DescribeAcls and Create/DeleteAcls need of
	// its Kafka login (grantedBy), and behind them the broker checks the
	// ACLs themselves, as over Kafka.
	ClassACLDescribe
	ClassACLAlter
)

var classNames = [...]string{"blocked", "operator", "produce", "consume", "queue admin", "read", "gated", "acl describe", "acl alter"}

func (c Class) String() string { return classNames[c] }

// Feature is a plan feature a gated route needs.
type Feature string

// Plan features.
const (
	FeatureStreams   Feature = "streams"
	FeatureTraces    Feature = "traces"
	FeatureKV        Feature = "kv"
	FeatureTimers    Feature = "timers"
	FeatureEphemeral Feature = "ephemeral"
)

// GatedOp is how a gated route weighs against quotas (spec §6.6): Read is
// never blocked, Grow is blocked like a push, Open never, Mixed only when
// its body holds a growing operation. Delete, never blocked either, is an
// operation that removes or moves what others wrote (a KV key, a timer):
// admin only, as deleting messages or a DLQ is.
type GatedOp uint8

// Gated operations.
const (
	OpRead GatedOp = iota + 1
	OpGrow
	OpMixed
	OpOpen
	OpDelete
)

// Route is a classified request.
type Route struct {
	Class   Class
	Feature Feature // ClassGated only
	Op      GatedOp // ClassGated only
}

func class(c Class) Route                     { return Route{Class: c} }
func gated(f Feature, op GatedOp) Route       { return Route{Class: ClassGated, Feature: f, Op: op} }
func under(path, prefix string) bool          { return path == prefix || strings.HasPrefix(path, prefix+"/") }
func isGet(method string) bool                { return method == "GET" || method == "HEAD" }
func oneOf(path string, exact ...string) bool { return slices.Contains(exact, path) }

// operatorPaths are the cell-wide routes only a live operator may open.
var operatorPaths = []string{"/api/v1/status", "/api/v1/status/buffers", "/api/v1/analytics/system-metrics",
	"/api/v1/analytics/worker-metrics", "/api/v1/analytics/postgres-stats", "/api/v1/system/maintenance",
	"/api/v1/system/maintenance/pop", "/metrics/prometheus"}

// Classify is the route classifier of spec §6.7: the first rule that
// matches wins, and anything API-shaped no rule names is blocked.
func Classify(method, path string) Route {
	switch {
	case oneOf(path, operatorPaths...):
		return class(ClassOperator)
	case path == aclsPath:
		return classifyACLs(method)
	case under(path, "/api/v1/migration"), under(path, "/api/v1/system"), under(path, "/internal"),
		oneOf(path, "/api/v1/stats/refresh", "/metrics", "/status", "/api/v1/pop", "/api/v1/pop/"):
		return class(ClassBlocked)
	case oneOf(path, "/api/v1/push", "/api/v1/transaction"):
		return class(ClassProduce)
	}
	if r, ok := classifyConsume(method, path); ok {
		return r
	}
	if r, ok := classifyQueueAdmin(method, path); ok {
		return r
	}
	if r, ok := classifyGated(method, path); ok {
		return r
	}
	return classifyRead(method, path)
}

// aclsPath is the broker's ACL admin route (http/api/acl_admin.go), the
// one /api/v1/system route a tenant's credential reaches: the bindings it
// lists and changes are its cluster's broker tenant's only (the broker
// scopes them by the tenant the proxy hands it), as a Kafka login's.
const aclsPath = "/api/v1/system/acls"

func classifyACLs(method string) Route {
	switch {
	case isGet(method):
		return class(ClassACLDescribe)
	case method == "POST" || method == "DELETE":
		return class(ClassACLAlter)
	}
	return class(ClassBlocked)
}

func classifyConsume(method, path string) (Route, bool) {
	switch {
	case strings.HasPrefix(path, "/api/v1/pop/queue/"), oneOf(path, "/api/v1/ack", "/api/v1/ack/batch"),
		strings.HasPrefix(path, "/api/v1/lease/"):
		return class(ClassConsume), true
	case oneOf(path, "/api/v1/fetch", "/api/v1/partitions/changed"):
		if method == "POST" {
			return class(ClassConsume), true
		}
		return class(ClassBlocked), true
	case oneOf(path, "/api/v1/fetch/", "/api/v1/partitions/changed/"):
		return class(ClassBlocked), true
	}
	return Route{}, false
}

func classifyQueueAdmin(method, path string) (Route, bool) {
	switch {
	case path == "/api/v1/configure":
		return class(ClassQueueAdmin), true
	case method == "DELETE" && strings.HasPrefix(path, "/api/v1/resources/queues/"):
		return class(ClassQueueAdmin), true
	case strings.HasPrefix(path, "/api/v1/messages/") && strings.HasSuffix(path, "/retry") && segments(path, "/api/v1/messages/", "/retry") == 2:
		if method == "POST" {
			return class(ClassQueueAdmin), true
		}
		return class(ClassBlocked), true
	case strings.HasPrefix(path, "/api/v1/dlq/") && strings.HasSuffix(path, "/replay") && segments(path, "/api/v1/dlq/", "/replay") == 1:
		if method == "POST" {
			return class(ClassQueueAdmin), true
		}
		return class(ClassBlocked), true
	case method == "DELETE" && strings.HasPrefix(path, "/api/v1/messages/"),
		method == "DELETE" && path == "/api/v1/dlq",
		(method == "DELETE" || method == "POST") && under(path, "/api/v1/consumer-groups"):
		return class(ClassQueueAdmin), true
	}
	return Route{}, false
}

// segments counts the non-empty segments between prefix and suffix of
// path, -1 when one is empty.
func segments(path, prefix, suffix string) int {
	mid := strings.TrimSuffix(strings.TrimPrefix(path, prefix), suffix)
	if mid == "" {
		return -1
	}
	parts := strings.Split(mid, "/")
	for _, p := range parts {
		if p == "" {
			return -1
		}
	}
	return len(parts)
}

func classifyGated(method, path string) (Route, bool) {
	switch {
	case under(path, "/streams"):
		switch {
		case method == "POST" && path == "/streams/v1/cycle":
			return gated(FeatureStreams, OpMixed), true
		case isGet(method):
			// The queries' list is a view; POST state/get stays open, as a
			// stream worker holding produce and consume reads its state.
			return gated(FeatureStreams, OpRead), true
		}
		return gated(FeatureStreams, OpOpen), true
	case method == "POST" && path == "/api/v1/traces":
		return gated(FeatureTraces, OpOpen), true
	case oneOf(path, "/api/v1/kv", "/api/v1/kv/"):
		if method == "POST" {
			return gated(FeatureKV, OpMixed), true
		}
		return class(ClassBlocked), true
	case strings.HasPrefix(path, "/api/v1/kv/"):
		return byMethod(FeatureKV, method, map[string]GatedOp{"GET": OpRead, "PUT": OpGrow, "DELETE": OpDelete}), true
	case path == "/api/v1/timers":
		if method == "POST" {
			return gated(FeatureTimers, OpMixed), true
		}
		return class(ClassBlocked), true
	case strings.HasPrefix(path, "/api/v1/timers/"):
		return byMethod(FeatureTimers, method, map[string]GatedOp{"GET": OpRead, "DELETE": OpDelete}), true
	case under(path, "/api/v1/ephemeral"):
		return classifyEphemeral(method, path), true
	}
	return Route{}, false
}

func byMethod(f Feature, method string, ops map[string]GatedOp) Route {
	if op, ok := ops[method]; ok {
		return gated(f, op)
	}
	return class(ClassBlocked)
}

// classifyEphemeral matches method and path exactly; anything else under
// /api/v1/ephemeral is blocked.
func classifyEphemeral(method, path string) Route {
	rest := strings.TrimPrefix(path, "/api/v1/ephemeral/")
	parts := strings.Split(rest, "/")
	switch {
	case method == "POST" && rest == "push":
		return gated(FeatureEphemeral, OpGrow)
	case method == "POST" && oneOf(rest, "ack", "configure", "reset"):
		return gated(FeatureEphemeral, OpOpen)
	case method == "GET" && rest == "pop":
		return gated(FeatureEphemeral, OpOpen)
	case method == "GET" && rest == "queues":
		return gated(FeatureEphemeral, OpRead)
	case method == "GET" && len(parts) == 3 && parts[0] == "queues" && parts[1] != "" && parts[2] == "depth":
		return gated(FeatureEphemeral, OpRead)
	case method == "DELETE" && len(parts) == 2 && parts[0] == "queue" && parts[1] != "":
		return gated(FeatureEphemeral, OpOpen)
	}
	return class(ClassBlocked)
}

func classifyRead(method, path string) Route {
	switch {
	case under(path, "/api/v1/messages"):
		if isGet(method) {
			return class(ClassRead)
		}
		return class(ClassBlocked)
	case under(path, "/api/v1/resources"), under(path, "/api/v1/status"), under(path, "/api/v1/analytics"):
		return class(ClassRead)
	case under(path, "/api/v1/consumer-groups"), path == "/api/v1/dlq", under(path, "/api/v1/traces"):
		if isGet(method) {
			return class(ClassRead)
		}
		return class(ClassBlocked)
	case under(path, "/api"):
		return class(ClassBlocked)
	}
	return class(ClassRead) // the dashboard's pages and assets
}

// grantedBy lists the scopes that let a credential use a route (spec
// §6.4). A gated route's Read op needs read authority; its other ops
// need write authority, which any of produce, consume or admin gives
// (docs/decisions.md); a growing op needs produce or admin, as a push does;
// a deleting op admin. An operation inside a mixed route needs the same as
// its own route (bodyRoutes).
func (r Route) grantedBy() []string {
	switch r.Class {
	case ClassProduce:
		return []string{ScopeProduce, ScopeAdmin}
	case ClassConsume:
		return []string{ScopeConsume, ScopeAdmin}
	case ClassQueueAdmin:
		return []string{ScopeAdmin}
	case ClassRead:
		return []string{ScopeRead, ScopeAdmin}
	case ClassACLDescribe:
		// Kafka's DescribeAcls needs the describe level, which every
		// scope passes (scopeLimits: read-only or write-only); the ACL
		// DESCRIBE on the cluster is the broker's to check.
		return []string{ScopeProduce, ScopeConsume, ScopeRead, ScopeAdmin}
	case ClassACLAlter:
		return []string{ScopeAdmin} // Create/DeleteAcls: the admin level
	case ClassGated:
		switch r.Op {
		case OpRead:
			return []string{ScopeRead, ScopeAdmin}
		case OpGrow:
			return []string{ScopeProduce, ScopeAdmin}
		case OpDelete:
			return []string{ScopeAdmin}
		default:
			return []string{ScopeProduce, ScopeConsume, ScopeAdmin}
		}
	}
	return nil
}

// allowedFor reports whether a credential holding scopes may use r.
func (r Route) allowedFor(scopes []string) bool {
	for _, s := range r.grantedBy() {
		if slices.Contains(scopes, s) {
			return true
		}
	}
	return false
}

// meterOp is the usage class a request is metered under (spec §6.7):
// push, delivery (pops), txn, configure, read (everything else).
func meterOp(path string) string {
	switch {
	case path == "/api/v1/push":
		return "push"
	case path == "/api/v1/transaction":
		return "txn"
	case path == "/api/v1/configure":
		return "configure"
	case strings.HasPrefix(path, "/api/v1/pop/queue/"):
		return "delivery"
	}
	return "read"
}
