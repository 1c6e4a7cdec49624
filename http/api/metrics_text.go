package api

import (
	"bytes"
	"strconv"
	"strings"
)

// promText writes families assembled at scrape time: a family's HELP and
// TYPE lines once, then its samples.
type promText struct{ b *bytes.Buffer }

func (p promText) family(name, typ string) {
	p.b.WriteString("# HELP " + name + " " + helpOf(name) + "\n# TYPE " + name + " " + typ + "\n")
}

// value writes one sample; labels is "" or `{k="v",...}`.
func (p promText) value(name, labels string, v uint64) {
	p.b.Write(strconv.AppendUint(p.sample(name, labels), v, 10))
	p.b.WriteByte('\n')
}

func (p promText) float(name, labels string, v float64) {
	p.b.Write(strconv.AppendFloat(p.sample(name, labels), v, 'g', -1, 64))
	p.b.WriteByte('\n')
}

// sample writes a sample's name and labels and answers the buffer's free
// space for its value: a scrape writes a sample per queue and family, each
// then without an allocation.
func (p promText) sample(name, labels string) []byte {
	p.b.WriteString(name)
	p.b.WriteString(labels)
	p.b.WriteByte(' ')
	return p.b.AvailableBuffer()
}

// addHelp copies the metrics library's exposition to dst, filling in the
// text of its HELP lines, which the library leaves empty.
func addHelp(dst *bytes.Buffer, src []byte) {
	for len(src) > 0 {
		line := src
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			line, src = src[:i], src[i+1:]
		} else {
			src = nil
		}
		if name, ok := bytes.CutPrefix(line, []byte("# HELP ")); ok && bytes.IndexByte(name, ' ') < 0 {
			dst.WriteString("# HELP " + string(name) + " " + helpOf(string(name)) + "\n")
			continue
		}
		dst.Write(line)
		dst.WriteByte('\n')
	}
}

// helpOf is a family's HELP text. Every queen_ family has its line here
// (and its entry in docs/metrics.md, which a test compares with a scrape);
// the Go runtime and process families the library writes get a pointer
// to where they are defined.
func helpOf(name string) string {
	if h, ok := familyHelp[name]; ok {
		return h
	}
	switch {
	case strings.HasPrefix(name, "go_"):
		return "Go runtime metric (runtime/metrics, runtime.MemStats)."
	case strings.HasPrefix(name, "process_"):
		return "Process metric read from /proc."
	}
	return "Undocumented: add it to familyHelp and docs/metrics.md."
}

var familyHelp = map[string]string{
	// HTTP API
	"queen_http_requests_total":           "HTTP requests answered, by route and status.",
	"queen_http_request_duration_seconds": "Time to answer an HTTP request, by route (a long-poll pop counts its wait).",
	"queen_http_buffered_body_bytes":      "Request body bytes held in memory by requests in flight.",
	"queen_streams_cycles_total":          "Streams cycles answered on this node, by outcome (committed, rolled_back).",
	"queen_streams_state_ops_total":       "State operations of committed Streams cycles on this node.",
	"queen_streams_queries":               "Streams queries registered, in this node's replica of each group.",
	"queen_streams_state_rows":            "Streams state rows, in this node's replica of each group.",
	"queen_streams_state_bytes":           "Stored bytes (keys and values) of Streams state rows, in this node's replica of each group.",
	"queen_http_push_messages_total":      "Messages accepted by HTTP pushes on this node.",
	"queen_http_push_bytes_total":         "Request body bytes of HTTP pushes that queued at least one message on this node.",
	"queen_http_pop_messages_total":       "Messages delivered by HTTP pops on this node.",
	"queen_http_pop_bytes_total":          "Response body bytes of HTTP pops that delivered messages on this node.",
	"queen_maintenance_held_items":        "Items in the maintenance hold, not yet delivered (cluster-wide, as this node has applied).",
	"queen_maintenance_holding":           "1 while this node sends HTTP pushes to the maintenance hold.",
	"queen_maintenance_pop_paused":        "1 while pop maintenance mode empties this node's pops.",
	// Kafka facade
	"queen_kafka_request_duration_seconds":  "Time to handle a Kafka request, by API (a fetch counts its wait).",
	"queen_kafka_produce_records_total":     "Records of produce requests accepted on this node.",
	"queen_kafka_produce_bytes_total":       "Record batch bytes of produce requests accepted on this node.",
	"queen_kafka_fetch_records_total":       "Records returned by fetches on this node (control records excluded).",
	"queen_kafka_fetch_bytes_total":         "Record batch bytes returned by fetches on this node.",
	"queen_kafka_log_cleaner_offsets_total": "Offsets the Kafka log cleaner emptied by this node's proposals, by reason (retention_bytes, compaction).",
	// Raft groups
	"queen_raft_leader_id":                 "Node id of the group's leader, 0 while none is known.",
	"queen_raft_is_leader":                 "1 when this node leads the group.",
	"queen_raft_term":                      "The group's raft term as this node sees it.",
	"queen_raft_applied_index":             "Last raft index this node applied in the group.",
	"queen_raft_commit_index":              "Last raft index this node knows committed in the group.",
	"queen_raft_apply_lag_entries":         "Committed entries this node has not applied yet in the group.",
	"queen_raft_proposal_duration_seconds": "Time from proposing an entry on this node to its result, per group (committed entries only).",
	"queen_raft_snapshots_total":           "Snapshots this node's replica of the group took.",
	"queen_raft_snapshots_received_total":  "Snapshots this node's replica of the group received from a leader.",
	"queen_raft_rpc_refused_total":         "Raft connections to the group's listener refused (bad or missing raft token).",
	"queen_raft_rpc_rejected_total":        "Raft messages to the group's listener rejected after the handshake.",
	"queen_raft_tls_refused_total":         "TLS handshakes the group's raft listener refused.",
	"queen_raft_batches_oversized_total":   "Raft message batches over the frame limit, not sent.",
	"queen_link_refused_total":             "Standby link requests to the group's listener refused (bad or missing QUEEN_LINK_TOKEN).",
	// Storage and disk
	"queen_storage_full":                        "1 while this node refuses new data: its disk is above QUEEN_RAFT_DISK_HIGH_PCT.",
	"queen_storage_segment_files":               "Record segment files of the group's store on this node.",
	"queen_storage_segment_bytes":               "Bytes of the group's record segment files on this node.",
	"queen_storage_corrupt_chunks_total":        "Chunk reads refused since start because their checksum failed.",
	"queen_data_dir_bytes":                      "Disk space the data dir's files take (blocks, as du counts; measured at most every 10 s).",
	"queen_data_dir_filesystem_size_bytes":      "Size of the data dir's filesystem.",
	"queen_data_dir_filesystem_available_bytes": "Bytes of the data dir's filesystem available to the node.",
	// Clock
	"queen_clock_synced":                 "1 once this node's clock has been compared with the cluster's.",
	"queen_clock_wall_offset_seconds":    "This node's clock minus its local wall clock.",
	"queen_clock_cluster_offset_seconds": "The cluster's median clock minus this node's, at the last comparison.",
	"queen_clock_corrections_total":      "Times this node took the cluster's time.",
	"queen_clock_steps_ignored_total":    "Wall-clock jumps this node ignored.",
	// Queues and consumer groups
	"queen_queue_messages_in_total":               "Messages ever appended to the queue (its partitions' high-water marks).",
	"queen_queue_messages_out_total":              "Messages delivered by pops since this node started.",
	"queen_queue_messages_completed_total":        "Messages acknowledged as completed since this node started.",
	"queen_queue_messages_failed_total":           "Messages acknowledged as failed since this node started.",
	"queen_queue_messages_dead_lettered_total":    "Messages moved to the dead-letter queue since this node started.",
	"queen_queue_depth":                           "Pending plus processing messages, seen from the queue's most-behind group.",
	"queen_queue_messages_retained":               "Messages the queue still stores.",
	"queen_queue_dlq_messages":                    "Live dead-letter rows of the queue.",
	"queen_queue_partitions":                      "Partitions of the queue.",
	"queen_consumer_group_lag_messages":           "Messages the group has not consumed in the queue, all partitions (HTTP groups and Kafka committed offsets).",
	"queen_consumer_group_partition_lag_messages": "Messages the group has not consumed in one partition; only for queues of at most QUEEN_METRICS_LAG_PARTITIONS_MAX partitions.",
	"queen_consumer_group_lag_truncated":          "1 when QUEEN_METRICS_GROUP_LAG_MAX_CURSORS cut this scrape's lag families short.",
	"queen_consumer_group_lag_collapsed_queues":   "Queues whose partition count exceeds QUEEN_METRICS_LAG_PARTITIONS_MAX: their lag is written per queue only.",
}
