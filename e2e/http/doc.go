// Package http tests the broker's HTTP API and what is served over HTTP,
// end to end against real nodes over their ports: push, pop, leases, acks,
// retries and dead letters, consumer groups, long polling, subscriptions
// and retention; the resource views and their paging; the cleanup of idle
// partitions; KV, locks, semaphores and timers; transactions, within a
// raft group and across groups through crashes (HTTP and Kafka ones);
// payload encryption, entry sizes, bad input, tenants and broker tokens;
// ephemeral queues; the web dashboard and the proxy's console driven in a
// headless Chromium (docs/ui.md, e2e/browser); the embedded tenancy proxy
// (docs/proxy.md).
//
// It never tests the Kafka protocol for its own sake (e2e/kafka), a
// cluster's guarantees (e2e/cluster), operating it, the command line,
// metrics and logs (e2e/ops), or injected faults (e2e/faults). Shared
// helpers are in e2e/e2etest.
package http
