// Package kafka tests the Kafka wire protocol end to end, against real
// nodes with real clients: franz-go, sarama and kafka-go (Go modules),
// kcat, kafkajs and kafka-python (skipped when not installed; the scripts
// are in e2e/clients). Produce and fetch, topics and their configs,
// compression, consumer groups (classic, the consumer protocol, static
// members, share groups) through coordinator kills and restarts,
// idempotent producers, transactions, SASL, TLS and broker tokens, and
// what crosses between Kafka and HTTP on one queue.
//
// It never tests the HTTP API for its own sake (e2e/http), a cluster's
// guarantees (e2e/cluster), operating it (e2e/ops) or injected faults
// (e2e/faults). Shared helpers are in e2e/e2etest.
package kafka
