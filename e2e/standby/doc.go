// Package standby holds the end-to-end tests of a standby cluster
// (QUEEN_STANDBY_OF, docs/standby.md): a source under HTTP and Kafka load
// followed by a standby, the source killed, the standby promoted, and
// what the source acknowledged checked on it.
package standby
