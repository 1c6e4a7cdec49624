package raftgroups

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"
	"github.com/lni/dragonboat/v4/raftio"
)

// LatencyBuckets are the upper bounds, in seconds, of every latency
// histogram queen exposes (raft proposals, HTTP and Kafka requests):
// Prometheus' `le` buckets, starting below a millisecond because a local
// commit takes about that long, ending where a request times out.
var LatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// groupMetrics are the series one group adds to Config.Metrics. They are
// got or created, not created, so a host restarted in the same process
// (tests) reuses its series rather than panicking on a duplicate name.
type groupMetrics struct {
	proposal          *metrics.PrometheusHistogram
	snapshots         *metrics.Counter
	snapshotsReceived *metrics.Counter
}

func newGroupMetrics(set *metrics.Set, n int) *groupMetrics {
	l := fmt.Sprintf(`{group="%d"}`, n)
	return &groupMetrics{
		proposal:          set.GetOrCreatePrometheusHistogramExt("queen_raft_proposal_duration_seconds"+l, LatencyBuckets),
		snapshots:         set.GetOrCreateCounter("queen_raft_snapshots_total" + l),
		snapshotsReceived: set.GetOrCreateCounter("queen_raft_snapshots_received_total" + l),
	}
}

// snapshotCounter counts a group's snapshots as dragonboat reports them:
// those this replica took, and those a leader sent it. Dragonboat calls it
// from its own goroutines; counting never blocks them.
type snapshotCounter struct{ m *groupMetrics }

var _ raftio.ISystemEventListener = snapshotCounter{}

func (c snapshotCounter) SnapshotCreated(raftio.SnapshotInfo)  { c.m.snapshots.Inc() }
func (c snapshotCounter) SnapshotReceived(raftio.SnapshotInfo) { c.m.snapshotsReceived.Inc() }

func (snapshotCounter) NodeHostShuttingDown()                       {}
func (snapshotCounter) NodeUnloaded(raftio.NodeInfo)                {}
func (snapshotCounter) NodeDeleted(raftio.NodeInfo)                 {}
func (snapshotCounter) NodeReady(raftio.NodeInfo)                   {}
func (snapshotCounter) MembershipChanged(raftio.NodeInfo)           {}
func (snapshotCounter) ConnectionEstablished(raftio.ConnectionInfo) {}
func (snapshotCounter) ConnectionFailed(raftio.ConnectionInfo)      {}
func (snapshotCounter) SendSnapshotStarted(raftio.SnapshotInfo)     {}
func (snapshotCounter) SendSnapshotCompleted(raftio.SnapshotInfo)   {}
func (snapshotCounter) SendSnapshotAborted(raftio.SnapshotInfo)     {}
func (snapshotCounter) SnapshotRecovered(raftio.SnapshotInfo)       {}
func (snapshotCounter) SnapshotCompacted(raftio.SnapshotInfo)       {}
func (snapshotCounter) LogCompacted(raftio.EntryInfo)               {}
func (snapshotCounter) LogDBCompacted(raftio.EntryInfo)             {}
