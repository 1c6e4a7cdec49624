// Package ops tests operating queen, end to end against real nodes: what
// docs/operations.md describes (adding, replacing and removing nodes,
// recovering from a lost majority, rolling restarts under load, TLS
// between nodes, calls between nodes over the node channel), the queen
// command line (docs/cli.md), the Prometheus scrape and the Grafana
// dashboard's queries (docs/metrics.md), and what a node logs.
//
// It never tests the HTTP API, what is served over it (the dashboard, the
// proxy) or the Kafka protocol for their own sake (e2e/http, e2e/kafka), a
// cluster's guarantees (e2e/cluster) or injected faults (e2e/faults).
// Shared helpers are in e2e/e2etest.
package ops
