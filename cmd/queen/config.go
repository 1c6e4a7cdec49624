package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// Config is every setting of the binary, read from the environment once at
// boot (names and defaults from spec queen.md §8) and passed down as the
// per-package config structs.
type Config struct {
	ServerID string
	LogLevel slog.Level
	LogJSON  bool // LOG_FORMAT=json (or QUEEN_LOG_JSON)

	HTTP          api.Config
	Raft          raftgroups.Config
	Kafka         KafkaConfig
	Auth          authn.Config
	Placement     tenancy.Placement
	TenantGroups  string
	ShutdownGrace time.Duration
	// EncryptionKey is QUEEN_ENCRYPTION_KEY parsed; EncryptionKeyErr says
	// why a set key is unusable (the node then runs without encryption,
	// as the spec says, and warns).
	EncryptionKey    envelope.Key
	EncryptionKeySet bool
	EncryptionKeyErr error
	// PprofAddr serves net/http/pprof when set (QUEEN_PPROF_ADDR, our own
	// addition for profiling). Beyond loopback it needs PprofToken
	// (QUEEN_PPROF_TOKEN), which every request must then carry as a
	// bearer token.
	PprofAddr  string
	PprofToken string
	// MemoryLimit is the node's memory budget in bytes
	// (QUEEN_MEMORY_LIMIT_MB; 0: none): the Go runtime's soft limit, and
	// what sizes each raft group's block cache and memtables. A GOMEMLIMIT
	// in the environment is the runtime's own setting and wins
	// (MemoryLimitFromGo).
	MemoryLimit       int64
	MemoryLimitFromGo bool
	// Proxy is the embedded proxy (QUEEN_PROXY_*).
	Proxy ProxyConfig
	// ACLs is QUEEN_ACLS and QUEEN_ACL_SUPER_USERS (config_acls.go).
	ACLs ACLConfig
	// StandbyGroupsSet: QUEEN_RAFT_GROUPS was given on a standby
	// (config_standby.go), which must then equal the source's.
	StandbyGroupsSet bool
	// RaftAllowAnonymous (QUEEN_RAFT_ALLOW_ANONYMOUS) says a raft port
	// reachable beyond loopback without QUEEN_RAFT_TOKEN is intended while
	// JWT_ENABLED=true (checkRaftAuth).
	RaftAllowAnonymous bool
}

// env reads variables through a lookup function, remembering the first
// error so a whole config can be read and checked once. Every error names
// its variable. It also records every variable it is asked for, with the
// default the reading code gave, in the order read: `queen config` lists
// the settings from that record, so the list is the code that reads them.
// Hence every variable is read whatever the others say (a mode that needs
// it only checks it then), or the list would lose it in some environments.
type env struct {
	get func(string) string
	// isSet tells a variable set to "" from an unset one, where that
	// matters (QUEEN_PROXY_OPERATORS); nil: only non-empty counts as set.
	isSet func(string) bool
	err   error
	read  []readVar
	seen  map[string]int
}

// readVar is one variable the config read and the default it was read with
// ("" when the code gives none).
type readVar struct {
	Name    string
	Default string
}

// lookup reads one variable, recording that it is read.
func (e *env) lookup(name string) string {
	e.note(name, "", false)
	return e.get(name)
}

// note records name; withDefault replaces a default recorded by a plain
// lookup of the same variable.
func (e *env) note(name, def string, withDefault bool) {
	if e.seen == nil {
		e.seen = map[string]int{}
	}
	i, ok := e.seen[name]
	if !ok {
		e.seen[name] = len(e.read)
		e.read = append(e.read, readVar{Name: name, Default: def})
		return
	}
	if withDefault {
		e.read[i].Default = def
	}
}

func (e *env) fail(name, format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
}

// tokenList reads a comma-separated list of extra raft tokens; one is
// accepted only beside a QUEEN_RAFT_TOKEN, since without a token nothing
// is checked.
func (e *env) tokenList(name string) []string {
	var out []string
	for _, t := range strings.Split(e.lookup(name), ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	if len(out) > 0 && e.lookup("QUEEN_RAFT_TOKEN") == "" {
		e.fail(name, "needs QUEEN_RAFT_TOKEN: without a token nothing is checked")
	}
	return out
}

func (e *env) str(name, def string) string {
	e.note(name, def, true)
	if v := strings.TrimSpace(e.lookup(name)); v != "" {
		return v
	}
	return def
}

func (e *env) int(name string, def, min, max int) int {
	e.note(name, strconv.Itoa(def), true)
	v := strings.TrimSpace(e.lookup(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		e.fail(name, "must be a whole number in %d..%d, got %q", min, max, v)
		return def
	}
	return n
}

// bool accepts true/false, 1/0, yes/no, on/off (spec §5.2); anything else
// stops the boot.
func (e *env) bool(name string, def bool) bool {
	e.note(name, strconv.FormatBool(def), true)
	switch strings.ToLower(strings.TrimSpace(e.lookup(name))) {
	case "":
		return def
	case "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	e.fail(name, "must be true/false, 1/0, yes/no or on/off, got %q", e.lookup(name))
	return def
}

// days reads a number of days, a fraction allowed ("0.5" is 12 hours), in
// (0, max].
func (e *env) days(name string, def, max float64) time.Duration {
	e.note(name, strconv.FormatFloat(def, 'g', -1, 64), true)
	v := strings.TrimSpace(e.lookup(name))
	d := def
	if v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || !(n > 0 && n <= max) {
			e.fail(name, "must be a number of days above 0 and at most %g, got %q", max, v)
			return 0
		}
		d = n
	}
	return time.Duration(d * 24 * float64(time.Hour))
}

func (e *env) millis(name string, def time.Duration, min, max time.Duration) time.Duration {
	ms := e.int(name, int(def/time.Millisecond), int(min/time.Millisecond), int(max/time.Millisecond))
	return time.Duration(ms) * time.Millisecond
}

// loadConfig reads the whole configuration. The first bad variable stops
// the boot with one line naming it.
func loadConfig(lookup func(string) string) (Config, error) {
	return readConfig(&env{get: lookup})
}

// loadProcessConfig reads the configuration from this process's
// environment.
func loadProcessConfig() (Config, error) {
	return readConfig(&env{get: os.Getenv, isSet: func(name string) bool {
		_, ok := os.LookupEnv(name)
		return ok
	}})
}

// readConfig reads the whole configuration through e.
func readConfig(e *env) (Config, error) {
	var c Config
	host, _ := os.Hostname()
	c.ServerID = e.str("QUEEN_SERVER_ID", host)
	c.LogJSON = e.logFormat()
	c.LogLevel = e.logLevel()

	port := e.int("PORT", 6632, 1, 65535)
	bind := e.str("QUEEN_BIND_ADDR", "0.0.0.0")
	c.HTTP = api.Config{
		Addr:             net.JoinHostPort(bind, strconv.Itoa(port)),
		MaxBodyBytes:     e.int("QUEEN_MAX_BODY_BYTES", 64<<20, 1024, 1<<30),
		MaxBufferedBytes: e.int("QUEEN_HTTP_MAX_BUFFERED_BYTES", api.DefaultMaxBufferedBytes, 1<<20, 1<<40),
		MaxConnections:   e.int("QUEEN_HTTP_MAX_CONNECTIONS", api.DefaultMaxConnections, 1, 1<<20),
		MaxConnsPerIP:    e.int("QUEEN_HTTP_MAX_CONNS_PER_IP", api.DefaultMaxConnsPerIP, 0, 1<<20),
		MaxPushItems:     e.int("QUEEN_MAX_PUSH_ITEMS", api.DefaultMaxPushItems, 1, 1<<24),
		TenantMaxInflightPushItems: e.int("QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS",
			api.DefaultTenantMaxInflightPushItem, 1, 1<<30),
		RequestTimeout:    e.millis("QUEEN_STMT_TIMEOUT_MS", 30*time.Second, 100*time.Millisecond, 10*time.Minute),
		PopDefaultTimeout: e.millis("POP_DEFAULT_TIMEOUT_MS", e.millis("DEFAULT_TIMEOUT", 30*time.Second, 0, time.Hour), 0, time.Hour),
		PopMaxTimeout:     60 * time.Second,
		Version:           version,
		KVMaxValueBytes:   e.int("QUEEN_KV_MAX_VALUE_BYTES", 64<<10, 1, 16<<20),
		TimersMaxHorizon:  time.Duration(e.int("QUEEN_TIMERS_MAX_HORIZON_S", 7776000, 1, 1<<31-1)) * time.Second,

		GroupLagMaxCursors: e.int("QUEEN_METRICS_GROUP_LAG_MAX_CURSORS", 200000, 1, 1<<30),
		LagPartitionsMax:   e.int("QUEEN_METRICS_LAG_PARTITIONS_MAX", 32, 1, 1<<20),
		PromoteMaxLag:      uint64(e.int("QUEEN_RAFT_PROMOTE_MAX_LAG", 1000, 0, 1<<40)),
	}
	// Queen's server defaults to "" (= all): a new consumer group reads
	// from the beginning, and its SDKs' consumer-group flows rely on it;
	// new is the opt-in.
	switch m := e.str("DEFAULT_SUBSCRIPTION_MODE", "all"); m {
	case "new", "new-only":
		c.HTTP.DefaultSubscription = wire.SubNew
	default:
		c.HTTP.DefaultSubscription = wire.SubAll
	}

	c.Auth = e.authConfig()
	c.HTTP.TenancyHeader = e.tenancyConfig()
	if c.HTTP.TenantMaxInflightPushItems < c.HTTP.MaxPushItems {
		e.fail("QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS", "must be at least QUEEN_MAX_PUSH_ITEMS (%d), got %d",
			c.HTTP.MaxPushItems, c.HTTP.TenantMaxInflightPushItems)
	}
	if c.HTTP.MaxBufferedBytes < c.HTTP.MaxBodyBytes {
		e.fail("QUEEN_HTTP_MAX_BUFFERED_BYTES", "must be at least QUEEN_MAX_BODY_BYTES (%d), got %d", c.HTTP.MaxBodyBytes, c.HTTP.MaxBufferedBytes)
	}
	c.Raft = e.raftConfig()
	e.linkConfig(&c.Raft)
	c.StandbyGroupsSet = e.standbyConfig(&c.Raft)
	c.RaftAllowAnonymous = e.checkRaftAuth(c.Auth.Enabled, c.Raft)
	c.MemoryLimit = int64(e.int("QUEEN_MEMORY_LIMIT_MB", 1024, 0, 1<<24)) << 20
	if e.lookup("GOMEMLIMIT") != "" {
		// The runtime has read it already (and refused the process if malformed).
		c.MemoryLimit, c.MemoryLimitFromGo = debug.SetMemoryLimit(-1), true
	}
	c.Raft.MemoryBudget = c.MemoryLimit
	c.Raft.DragonboatLogLevel = dragonboatLevel(c.LogLevel)
	c.Raft.RequestTimeout = c.HTTP.RequestTimeout
	c.HTTP.Ephemeral = e.ephemeralConfig(c.Raft, c.HTTP.TenancyHeader)
	c.Kafka = e.kafkaConfig(c.Raft.NodeID, len(c.Raft.Peers) > 1 || c.Raft.Join)
	c.Kafka.Broker.LogDir = c.Raft.Dir
	e.checkKafkaAuth(c.Auth.Enabled, &c.Kafka)
	c.ACLs = e.aclConfig()
	c.TenantGroups = e.str("QUEEN_TENANT_GROUPS", "")
	c.ShutdownGrace = e.millis("QUEEN_SHUTDOWN_GRACE_MS", 10*time.Second, 0, 10*time.Minute)
	c.PprofAddr, c.PprofToken = e.pprofConfig()
	c.Proxy = e.proxyConfig(bind, c.HTTP.Addr, len(c.Raft.Peers) > 1 || c.Raft.Join, c.HTTP.MaxBodyBytes, c.Raft.NodeID)
	c.Proxy.Proxy.RequestTimeout = min(c.HTTP.RequestTimeout, 5*time.Second)
	c.Proxy.Proxy.MaxConnections, c.Proxy.Proxy.MaxConnsPerIP = c.HTTP.MaxConnections, c.HTTP.MaxConnsPerIP
	if raw := e.lookup("QUEEN_ENCRYPTION_KEY"); raw != "" {
		c.EncryptionKeySet = true
		c.EncryptionKey, c.EncryptionKeyErr = envelope.ParseKey(raw)
	}
	if e.err != nil {
		return c, e.err
	}
	p, err := tenancy.NewPlacement(c.Raft.Groups, c.TenantGroups)
	if err != nil {
		return c, err
	}
	c.Placement = p
	c.Raft.Placement = p.Spec()
	return c, nil
}

// defaultGroups is how many raft groups this node runs without
// QUEEN_RAFT_GROUPS (raftgroups.DefaultGroups).
func defaultGroups(nodes int) int { return raftgroups.DefaultGroups(nodes, runtime.NumCPU()) }

func (e *env) logLevel() slog.Level {
	v := e.str("LOG_LEVEL", e.str("RUST_LOG", "info"))
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(v))); err != nil {
		e.fail("LOG_LEVEL", "must be debug, info, warn or error, got %q", v)
	}
	return l
}

func (e *env) raftConfig() raftgroups.Config {
	r := raftgroups.Config{
		NodeID:       uint64(e.int("QUEEN_RAFT_NODE_ID", 1, 1, 1<<30)),
		ListenAddr:   e.str("QUEEN_RAFT_LISTEN", "0.0.0.0:7400"),
		Dir:          e.str("QUEEN_RAFT_DIR", "./queen-data"),
		Token:        e.lookup("QUEEN_RAFT_TOKEN"),
		AcceptTokens: e.tokenList("QUEEN_RAFT_TOKEN_ACCEPT"),
		TLS:          e.nodeTLS(),

		RTTMillisecond:  uint64(e.int("QUEEN_RAFT_RTT_MS", 50, 1, 1000)),
		SnapshotEntries: uint64(e.int("QUEEN_RAFT_SNAPSHOT_ENTRIES", 20000, 10, 1<<24)),
		SnapshotBytes:   uint64(e.int("QUEEN_RAFT_SNAPSHOT_BYTES", 256<<20, 1<<20, 1<<40)),
		MaxEntryBytes:   e.int("QUEEN_RAFT_ENTRY_MAX_BYTES", 96<<20, 1<<20, raftgroups.MaxEntryLimit),
		MaxBatchBytes:   e.int("QUEEN_RAFT_ENTRY_GATHER_BYTES", raftgroups.DefaultGatherBytes, 4<<10, raftgroups.MaxEntryLimit),
		// 0: sized from the memory budget (raftgroups.InFlightBytes).
		MaxInFlightBytes: e.int("QUEEN_RAFT_INFLIGHT_BYTES", 0, 0, 1<<30),
		QueueDepth:       e.int("QUEEN_RAFT_PLANNER_QUEUE_DEPTH", 4096, 16, 1<<20),
		ReadyQuorum:      e.millis("QUEEN_RAFT_READY_QUORUM_MS", 5*time.Second, 100*time.Millisecond, time.Hour),
		ReadyLag:         uint64(e.int("QUEEN_RAFT_READY_LAG_ENTRIES", 1000, 1, 1<<30)),
		TraceRetention:   time.Duration(e.int("QUEEN_RAFT_TRACE_RETENTION_S", 604800, 1, 1<<31-1)) * time.Second,
		// Spec §1.1: empty partitions idle this long are removed; off
		// leaves them for ever.
		PartitionCleanup: e.days("PARTITION_CLEANUP_DAYS", 30, 36500),
		// Partition state beyond this stays on disk (storage/partcache.go).
		PartitionCache: e.int("QUEEN_PARTITION_CACHE", storage.DefaultPartitionCache, 0, 1<<30),
		DiskHighPct:    float64(e.int("QUEEN_RAFT_DISK_HIGH_PCT", 85, 1, 100)),
		DiskLowPct:     float64(e.int("QUEEN_RAFT_DISK_LOW_PCT", 80, 0, 99)),
		CrashAt:        e.str("QUEEN_FAULT_CRASH_AT", ""),
		MaxClockSkew:   e.millis("QUEEN_RAFT_MAX_CLOCK_SKEW_MS", 500*time.Millisecond, time.Millisecond, time.Minute),
		// Test only: offsets this node's wall clock reading, to run a node
		// whose clock is wrong (the clock bound's end-to-end tests).
		ClockTestOffset: time.Duration(e.int("QUEEN_TEST_CLOCK_OFFSET_MS", 0, -30*86400000, 30*86400000)) * time.Millisecond,
		// Test only: this node applies every batch of entries that much
		// later than it could, trailing its groups' leaders (the
		// read-your-writes end-to-end tests).
		ApplyTestDelay: e.millis("QUEEN_TEST_APPLY_DELAY_MS", 0, 0, time.Minute),
		HoldFormat:     !e.bool("QUEEN_FORMAT_AUTO_RAISE", true),
		// Test only: this node applies formats only up to this one, as an
		// older build (0: this build's newest).
		NewestFormat: uint32(e.int("QUEEN_TEST_NEWEST_FORMAT", 0, 0, int(wire.NewestFormat))),
	}
	if r.DiskLowPct >= r.DiskHighPct && r.DiskHighPct < 100 {
		e.fail("QUEEN_RAFT_DISK_LOW_PCT", "must be below QUEEN_RAFT_DISK_HIGH_PCT (%v), got %v", r.DiskHighPct, r.DiskLowPct)
	}
	if _, _, err := net.SplitHostPort(r.ListenAddr); err != nil {
		e.fail("QUEEN_RAFT_LISTEN", "must be host:port, got %q", r.ListenAddr)
	}
	r.Peers = e.peers(r.NodeID, r.ListenAddr)
	// A joining node may list only itself in QUEEN_RAFT_PEERS: it learns
	// the others from the membership. It is still a cluster's member.
	if !e.bool("QUEEN_PARTITION_CLEANUP_ENABLED", true) {
		r.PartitionCleanup = 0
	}
	r.Join = e.bool("QUEEN_RAFT_JOIN", false)
	r.ForceRecover = e.bool("QUEEN_RAFT_FORCE_RECOVER", false)
	if r.Join && r.ForceRecover {
		e.fail("QUEEN_RAFT_FORCE_RECOVER", "cannot be combined with QUEEN_RAFT_JOIN: recovery needs this node's data, a joiner has none")
	}
	// Existing data keeps the group count it was placed by (a new default
	// from more cores, or a promoted standby that ran its source's count,
	// would otherwise refuse to boot on it).
	groups := defaultGroups(len(r.Peers))
	if n, ok := raftgroups.RecordedGroups(r.Dir); ok {
		groups = n
	}
	r.Groups = e.int("QUEEN_RAFT_GROUPS", groups, 1, 64)
	// Spec §4.1: a cluster elects in about a second with a 100 ms heartbeat;
	// a single node needs no patience (150 ms, 50 ms).
	rtt := r.RTTMillisecond
	if len(r.Peers) > 1 || r.Join {
		r.HeartbeatRTT = max(1, 100/rtt)
		r.ElectionRTT = max(r.HeartbeatRTT*10, 1000/rtt)
	} else {
		r.HeartbeatRTT = 1
		r.ElectionRTT = max(3, 150/rtt)
	}
	return r
}

// checkRaftAuth refuses a node whose HTTP API needs a broker JWT while
// its raft port, on 0.0.0.0:7400 by default, checks nothing: without
// QUEEN_RAFT_TOKEN anyone who reaches it votes, appends, installs
// snapshots and calls /node/v1/ (membership changes, ephemeral relays
// that pop any tenant's queue by header), which JWT_ENABLED=true does not
// lead an operator to expect. A loopback-only listener reaches no one
// else; QUEEN_RAFT_ALLOW_ANONYMOUS=true says an open raft port is
// intended (logConfig then warns at every boot). It returns the opt-in.
func (e *env) checkRaftAuth(jwtOn bool, r raftgroups.Config) bool {
	allow := e.bool("QUEEN_RAFT_ALLOW_ANONYMOUS", false)
	if jwtOn && r.Token == "" && !allow && !loopbackOnly(r.ListenAddr) {
		e.fail("QUEEN_RAFT_TOKEN", "is unset while JWT_ENABLED=true and the raft listener (QUEEN_RAFT_LISTEN=%s) is reachable "+
			"beyond this host: anyone who reaches it could vote, append, install snapshots and call /node/v1/ "+
			"(membership, any tenant's ephemeral queues); set QUEEN_RAFT_TOKEN on every node, bind QUEEN_RAFT_LISTEN to loopback, "+
			"or set QUEEN_RAFT_ALLOW_ANONYMOUS=true if an unauthenticated raft port is intended", r.ListenAddr)
	}
	return allow
}

// peers parses QUEEN_RAFT_PEERS ("1=host1:7400/host1:6632,2=..."). Unset,
// the node is a cluster of one at its own raft address.
func (e *env) peers(self uint64, listen string) []raftgroups.Peer {
	spec := e.str("QUEEN_RAFT_PEERS", "")
	if spec == "" {
		return []raftgroups.Peer{{ID: self, RaftAddr: loopbackIfUnspecified(listen)}}
	}
	var out []raftgroups.Peer
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addrs, ok := strings.Cut(item, "=")
		n, err := strconv.ParseUint(strings.TrimSpace(id), 10, 64)
		if !ok || err != nil || n == 0 {
			e.fail("QUEEN_RAFT_PEERS", "%q is not <id>=<raft host:port>/<http host:port>", item)
			return nil
		}
		raft, httpAddr, _ := strings.Cut(addrs, "/")
		if _, _, err := net.SplitHostPort(raft); err != nil {
			e.fail("QUEEN_RAFT_PEERS", "peer %d raft address %q is not host:port", n, raft)
			return nil
		}
		out = append(out, raftgroups.Peer{ID: n, RaftAddr: raft, HTTPAddr: httpAddr})
	}
	found := false
	for _, p := range out {
		found = found || p.ID == self
	}
	if !found {
		e.fail("QUEEN_RAFT_PEERS", "does not list this node (QUEEN_RAFT_NODE_ID=%d)", self)
	}
	return out
}

// loopbackIfUnspecified turns a wildcard listen address into one a node can
// be reached at on this host, which is all a single node needs.
func loopbackIfUnspecified(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// pprofConfig reads QUEEN_PPROF_ADDR and QUEEN_PPROF_TOKEN. Profiles hold
// heap contents (payloads, tokens in flight) and a CPU profile costs the
// node, so the profiler listens beyond loopback only behind a token.
func (e *env) pprofConfig() (addr, token string) {
	addr, token = e.str("QUEEN_PPROF_ADDR", ""), e.lookup("QUEEN_PPROF_TOKEN")
	if addr == "" {
		return "", ""
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		e.fail("QUEEN_PPROF_ADDR", "must be host:port, got %q", addr)
	} else if token == "" && !loopbackOnly(addr) {
		e.fail("QUEEN_PPROF_ADDR", "%q is reachable beyond this host: bind the profiler to 127.0.0.1, "+
			"or set QUEEN_PPROF_TOKEN and send it as a bearer token", addr)
	}
	return addr, token
}

// loopbackOnly reports whether a listen address is reachable from this host
// only.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
