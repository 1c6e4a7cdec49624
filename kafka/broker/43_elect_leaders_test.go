package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/wire"
)

// TestElectLeadersPreferred moves node 1's raft groups away, then elects a
// partition's preferred leader through kadm: the answer comes once the
// preferred node leads the partition's group again, and asking again is
// ELECTION_NOT_NEEDED, as is an unclean election of a led partition.
func TestElectLeadersPreferred(t *testing.T) {
	nodes := startCluster(t, 3)
	cl := clusterClient(t, nodes)
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "el", 6)
	// A partition whose group node 1 is preferred for.
	index, group := int32(-1), -1
	for i := range int32(6) {
		d, ok := nodes[0].engine.DirByIndex(wire.DefaultTenant, "el", uint32(i))
		if ok && nodes[0].engine.PreferredLeader(int(d.Group)) == 1 {
			index, group = i, int(d.Group)
			break
		}
	}
	if index < 0 {
		t.Fatal("no partition of el is preferred on node 1")
	}
	if led := nodes[0].host.HandOff(testWait); len(led) > 0 {
		t.Fatalf("groups %v still led by node 1", led)
	}
	set := kadm.TopicsSet{}
	set.Add("el", index)
	res, err := adm.ElectLeaders(ctxFor(t), kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	r := res["el"][index]
	t.Logf("first election of el/%d (group %d): %v", index, group, r.Err)
	// The balancer may have moved it back first: then there was nothing
	// to do; either way node 1 leads once the answer is in.
	if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("election: %+v", r)
	}
	if leader, _, ok := nodes[0].engine.Leader(group); !ok || leader != 1 {
		t.Fatalf("group %d led by %d after electing its preferred leader 1", group, leader)
	}
	again, err := adm.ElectLeaders(ctxFor(t), kadm.ElectPreferredReplica, set)
	if err != nil || !errors.Is(again["el"][index].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("second election: %v %+v", err, again)
	}
	unclean, err := adm.ElectLeaders(ctxFor(t), kadm.ElectLiveReplica, set)
	if err != nil || !errors.Is(unclean["el"][index].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean election: %v %+v", err, unclean)
	}
	// Every partition (no topic named): each is led by its preferred node
	// by the time the answer comes.
	all, err := adm.ElectLeaders(ctxFor(t), kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all["el"]) != 6 {
		t.Fatalf("all partitions: %+v", all)
	}
	for _, p := range all["el"] {
		if p.Err != nil && !errors.Is(p.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("el/%d: %v", p.Partition, p.Err)
		}
	}
}
