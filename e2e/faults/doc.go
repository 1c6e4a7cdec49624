// Package faults is the fault suite (docs/reliability.md): real clients
// (Kafka and HTTP) work through every node while nodes are killed, the
// network between them is cut, their clocks skewed, their disks filled or
// a byte of a segment corrupted; then every acknowledged message is
// checked for (lost, duplicated, reordered, ...). QUEEN_FAULT_ROUNDS,
// QUEEN_FAULT_PARTITION_ROUNDS, QUEEN_FAULT_EXACTLY_ONCE_ROUNDS and
// QUEEN_FAULT_SEED shape a run; scripts/faults.sh runs it and prints its
// figures.
//
// It owns every test named TestFault*, and nothing else: a node stopped or
// killed outside a fault schedule is e2e/cluster's or e2e/ops'. Shared helpers are in
// e2e/e2etest.
package faults
