package main

// settingDoc is one line of documentation for a setting, and whether its
// value is a secret that `queen config` must never show.
type settingDoc struct {
	doc    string
	secret bool
}

// settingDocs documents every variable the config reads, keyed by name.
// TestEverySettingIsDocumented keeps it equal to what readConfig reads:
// a variable added to the config without a line here, or a line left
// behind for a variable no longer read, fails the test.
var settingDocs = map[string]settingDoc{
	// Server and HTTP.
	"QUEEN_SERVER_ID":                      {doc: "instance name in logs and metrics (default: the host name)"},
	"QUEEN_LOG_JSON":                       {doc: "log lines as JSON instead of text"},
	"RUST_LOG":                             {doc: "log level, read when LOG_LEVEL is unset (Queen's name)"},
	"LOG_LEVEL":                            {doc: "log level: debug, info, warn or error"},
	"LOG_FORMAT":                           {doc: "log format: text or json (QUEEN_LOG_JSON is its older spelling)"},
	"QUEEN_METRICS_LAG_PARTITIONS_MAX":     {doc: "queues with more partitions get consumer lag per queue only in Prometheus"},
	"PORT":                                 {doc: "HTTP API port"},
	"QUEEN_BIND_ADDR":                      {doc: "address the HTTP API listens on"},
	"QUEEN_MAX_BODY_BYTES":                 {doc: "largest HTTP request body accepted (413 beyond)"},
	"QUEEN_HTTP_MAX_BUFFERED_BYTES":        {doc: "request bodies held in memory at once, all connections together"},
	"QUEEN_HTTP_MAX_CONNECTIONS":           {doc: "open HTTP connections at most"},
	"QUEEN_HTTP_MAX_CONNS_PER_IP":          {doc: "open HTTP connections per client address at most (0: no limit)"},
	"QUEEN_MAX_PUSH_ITEMS":                 {doc: "items in one push request at most"},
	"QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS": {doc: "push items one tenant may have in flight at once (429 beyond)"},
	"QUEEN_STMT_TIMEOUT_MS":                {doc: "how long one request's command may take before 503 timeout"},
	"DEFAULT_TIMEOUT":                      {doc: "long-poll wait of a pop without timeout, ms (Queen's older name)"},
	"POP_DEFAULT_TIMEOUT_MS":               {doc: "long-poll wait of a pop without timeout, ms"},
	"QUEEN_KV_MAX_VALUE_BYTES":             {doc: "largest KV value"},
	"QUEEN_TIMERS_MAX_HORIZON_S":           {doc: "furthest a timer may be scheduled ahead, seconds"},
	"QUEEN_METRICS_GROUP_LAG_MAX_CURSORS":  {doc: "cap on per-cursor consumer lag series in the metrics"},
	"QUEEN_RAFT_PROMOTE_MAX_LAG":           {doc: "entries a learner may trail by and still be promoted"},
	"DEFAULT_SUBSCRIPTION_MODE":            {doc: "where a new consumer group starts: new (only new messages) or all"},

	// Broker JWT (spec §8.4).
	"JWT_ENABLED":               {doc: "require a broker JWT on the HTTP API"},
	"JWT_ALGORITHM":             {doc: "HS256/384/512, RS256/384/512, EdDSA or auto"},
	"JWT_SECRET":                {doc: "HMAC secret for HS* tokens", secret: true},
	"JWT_PUBLIC_KEY":            {doc: "PEM public key for RS*/EdDSA tokens (shown masked: it spans lines)", secret: true},
	"JWT_JWKS_URL":              {doc: "JWKS URL to fetch signing keys from"},
	"JWT_JWKS_REFRESH_INTERVAL": {doc: "seconds between JWKS refreshes"},
	"JWT_JWKS_TIMEOUT_MS":       {doc: "timeout of one JWKS fetch"},
	"JWT_ISSUER":                {doc: "required iss claim (unset: not checked)"},
	"JWT_AUDIENCE":              {doc: "required aud claim (unset: not checked)"},
	"JWT_CLOCK_SKEW":            {doc: "seconds of clock skew allowed on exp/nbf"},
	"JWT_ROLES_CLAIM":           {doc: "claim holding one role"},
	"JWT_ROLES_ARRAY_CLAIM":     {doc: "claim holding a list of roles"},
	"JWT_TENANT_CLAIM":          {doc: "claim naming the caller's tenant"},
	"JWT_ROLE_ADMIN":            {doc: "role name of the admin level"},
	"JWT_ROLE_READ_WRITE":       {doc: "role name of the read-write level"},
	"JWT_ROLE_READ_ONLY":        {doc: "role name of the read-only level"},
	"JWT_ROLE_WRITE_ONLY":       {doc: "role name of the write-only level"},
	"JWT_SKIP_PATHS":            {doc: "comma-separated paths served without a token"},
	"QUEEN_TENANCY_HEADER":      {doc: "scope requests by the x-queen-tenant header (needs QUEEN_KV_TRUSTED_PROXY=1)"},
	"QUEEN_KV_TRUSTED_PROXY":    {doc: "1 asserts a proxy in front sets x-queen-tenant and strips clients' copies"},

	// Raft and storage (spec §8.2).
	"QUEEN_RAFT_NODE_ID":             {doc: "this node's id in the cluster"},
	"QUEEN_RAFT_LISTEN":              {doc: "raft listener; group N listens on its port + N"},
	"QUEEN_RAFT_DIR":                 {doc: "data directory"},
	"QUEEN_RAFT_TOKEN":               {doc: "token every node presents to its peers", secret: true},
	"QUEEN_RAFT_TOKEN_ACCEPT":        {doc: "other tokens accepted from peers while one is rotated", secret: true},
	"QUEEN_RAFT_TLS_CERT":            {doc: "certificate file for TLS between nodes"},
	"QUEEN_RAFT_TLS_KEY":             {doc: "key file for TLS between nodes (the path; the file is never read out)"},
	"QUEEN_RAFT_TLS_CA":              {doc: "CA file peers' certificates must chain to (mutual TLS)"},
	"QUEEN_RAFT_RTT_MS":              {doc: "raft tick, ms; heartbeat and election are counted in ticks"},
	"QUEEN_RAFT_SNAPSHOT_ENTRIES":    {doc: "entries between snapshots"},
	"QUEEN_RAFT_SNAPSHOT_BYTES":      {doc: "log bytes between snapshots"},
	"QUEEN_RAFT_ENTRY_MAX_BYTES":     {doc: "largest raft entry (413 too_large beyond)"},
	"QUEEN_RAFT_PLANNER_QUEUE_DEPTH": {doc: "commands queued per group before 429 overloaded"},
	"QUEEN_RAFT_READY_QUORUM_MS":     {doc: "a ready leader heard from a majority within this"},
	"QUEEN_RAFT_READY_LAG_ENTRIES":   {doc: "a ready node applied within this many entries of commit"},
	"QUEEN_RAFT_TRACE_RETENTION_S":   {doc: "how long message traces are kept, seconds"},
	"QUEEN_RAFT_DISK_HIGH_PCT":       {doc: "disk use above which writes answer 507 storage_full"},
	"QUEEN_RAFT_DISK_LOW_PCT":        {doc: "disk use below which writes are taken again"},
	"QUEEN_FAULT_CRASH_AT":           {doc: "test setting: kill the node at this fault point"},
	"QUEEN_RAFT_MAX_CLOCK_SKEW_MS":   {doc: "farther than this from the median of a majority, the node takes the cluster's time"},
	"QUEEN_TEST_CLOCK_OFFSET_MS":     {doc: "test setting: read the wall clock this far off"},
	"QUEEN_RAFT_PEERS":               {doc: "the cluster: id=raft host:port/http host:port, comma-separated"},
	"QUEEN_RAFT_JOIN":                {doc: "start without state as a non-voting member of an existing cluster (then promote it)"},
	"QUEEN_RAFT_FORCE_RECOVER":       {doc: "rebuild every group as a one-voter cluster of this node (majority lost for good)"},
	"QUEEN_RAFT_GROUPS":              {doc: "raft groups (1..64; default from the cores and the cluster size)"},
	"QUEEN_TENANT_GROUPS":            {doc: "tenant to raft group placement"},
	"QUEEN_SHUTDOWN_GRACE_MS":        {doc: "how long a stopping node hands off and drains"},

	// Ephemeral queues (spec §8.3).
	"QUEEN_EPHEMERAL_MAX_BYTES":        {doc: "memory all ephemeral queues of this node may hold"},
	"QUEEN_EPHEMERAL_QUEUE_MAX_BYTES":  {doc: "default memory of one ephemeral queue"},
	"QUEEN_EPHEMERAL_QUEUE_MAX_LENGTH": {doc: "default messages in one ephemeral queue"},
	"QUEEN_EPHEMERAL_LEASE_S":          {doc: "default ephemeral lease, seconds"},
	"QUEEN_EPHEMERAL_RETRY_LIMIT":      {doc: "default deliveries of an ephemeral message before it is dropped"},
	"QUEEN_EPHEMERAL_IMPLICIT_IDLE_S":  {doc: "an implicitly created ephemeral queue goes after this idle time"},
	"QUEEN_EPHEMERAL_MEMBER_TTL_MS":    {doc: "a node not heard from for this long leaves the ephemeral ring"},
	"QUEEN_EPHEMERAL_RATE":             {doc: "ephemeral pushes per second per tenant (0: no limit)"},
	"QUEEN_EPHEMERAL_BURST":            {doc: "ephemeral push burst per tenant"},
	"QUEEN_EPHEMERAL_REQUIRE_GRANT":    {doc: "a tenant needs an operator's grant (POST /api/v1/system/quota) to use ephemeral queues; default: QUEEN_TENANCY_HEADER"},

	// Kafka facade (spec §3.6).
	"QUEEN_KAFKA_ADDR":                            {doc: "Kafka listener"},
	"QUEEN_KAFKA_ADVERTISED_ADDR":                 {doc: "host:port Kafka clients reach this node at (required in a cluster)"},
	"QUEEN_KAFKA_MAX_CONNECTIONS":                 {doc: "open Kafka connections at most"},
	"QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP":          {doc: "open Kafka connections per client address at most"},
	"QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS": {doc: "Kafka connections not yet logged in at most"},
	"QUEEN_KAFKA_LOGIN_TIMEOUT_MS":                {doc: "time a Kafka connection has to log in"},
	"QUEEN_KAFKA_DEFAULT_PARTITIONS":              {doc: "partitions of an auto-created topic"},
	"QUEEN_KAFKA_MAX_PARTITIONS":                  {doc: "partitions of one topic at most"},
	"QUEEN_KAFKA_MAX_PARTITIONS_PER_REQUEST":      {doc: "partitions one Kafka request may name"},
	"QUEEN_KAFKA_MAX_TENANT_PARTITIONS":           {doc: "partitions one tenant may have at most"},
	"QUEEN_KAFKA_METADATA_MAX_PARTITIONS":         {doc: "partitions of a topic Kafka clients are shown at most (a larger HTTP queue answers POLICY_VIOLATION)"},
	"QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES":       {doc: "produce record bytes one tenant may have in flight on a node (tenancy mode)"},
	"QUEEN_KAFKA_DEDUP_WINDOW_SECONDS":            {doc: "how long idempotent producers' sequence numbers are remembered"},
	"QUEEN_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS":    {doc: "shortest consumer group session timeout accepted"},
	"QUEEN_KAFKA_GROUP_MAX_SESSION_TIMEOUT_MS":    {doc: "longest consumer group session timeout accepted"},
	"QUEEN_KAFKA_GROUP_JOIN_DELAY_MS":             {doc: "wait for more members before a new group's first rebalance"},
	"QUEEN_KAFKA_MAX_MESSAGE_BYTES":               {doc: "largest record batch accepted"},
	"QUEEN_KAFKA_MAX_DECOMPRESSED_BYTES":          {doc: "largest record batch after decompression"},
	"QUEEN_KAFKA_FETCH_MAX_BYTES":                 {doc: "bytes one fetch response carries at most"},
	"QUEEN_KAFKA_TXN_MAX_TIMEOUT_MS":              {doc: "longest transaction timeout a producer may ask for"},
	"QUEEN_KAFKA_LOG_CLEANER_INTERVAL_MS":         {doc: "how often a leader applies retention.bytes and compaction to its Kafka topics"},
	"QUEEN_KAFKA_TLS_CERT":                        {doc: "certificate file for TLS on the Kafka port"},
	"QUEEN_KAFKA_TLS_KEY":                         {doc: "key file for TLS on the Kafka port (the path)"},
	"QUEEN_KAFKA_ALLOW_ANONYMOUS":                 {doc: "say an unauthenticated Kafka port is intended while JWT_ENABLED=true"},
	"QUEEN_KAFKA_SASL":                            {doc: "SASL mechanisms Kafka clients log in with: plain, scram-sha-256, scram-sha-512, oauthbearer (comma-separated)"},
	"QUEEN_KAFKA_SASL_USERS":                      {doc: "user:password pairs for SASL/PLAIN without broker JWT, and for SCRAM", secret: true},

	// Operations.
	"QUEEN_PPROF_ADDR":     {doc: "serve the Go profiler here (beyond loopback only with QUEEN_PPROF_TOKEN)"},
	"QUEEN_PPROF_TOKEN":    {doc: "bearer token the profiler requires", secret: true},
	"QUEEN_ENCRYPTION_KEY": {doc: "64 hex digits: AES-256-GCM key for queues with encryptionEnabled", secret: true},
}
