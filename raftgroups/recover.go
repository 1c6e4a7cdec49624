package raftgroups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/lni/dragonboat/v4/tools"
)

// Disaster recovery (QUEEN_RAFT_FORCE_RECOVER, spec §4.4): when a majority
// of the voters is gone for good no group can commit, and raft offers no
// way out but to rewrite the survivor's history. Dragonboat's way is
// tools.ImportSnapshot with an exported snapshot (docs/devops.md, issue
// #150), so for each group this node:
//
//  1. starts its replica alone (no quorum needed to replay its own log);
//  2. exports a full snapshot of its store at its applied index (local,
//     no quorum needed);
//  3. closes it and imports that snapshot with itself as the only voter.
//
// Then the group starts as usual, a cluster of one that elects itself.
// Whatever this node had applied survives; entries it had in its log but
// had not applied (or never received) are lost. It runs once per data
// directory: a marker file makes later boots with the variable still set
// do nothing but warn, since recovering again would drop members added
// since.

const recoveredMarker = "force-recovered"

func (h *Host) forceRecover(n int, nhc config.NodeHostConfig, self, dir string) error {
	marker := filepath.Join(dir, recoveredMarker)
	if _, err := os.Stat(marker); err == nil {
		h.log.Warn("raft: QUEEN_RAFT_FORCE_RECOVER is set but this group was already recovered; ignoring it (unset it)",
			"group", n, "marker", marker)
		return nil
	}
	shard := uint64(n + 1)
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return fmt.Errorf("raftgroups: force recover group %d: node host: %w", n, err)
	}
	if !nh.HasNodeInfo(shard, h.cfg.NodeID) {
		nh.Close()
		return fmt.Errorf("raftgroups: force recover group %d: this node has no raft state to recover from", n)
	}
	store := h.newStore(n, filepath.Join(dir, "store"))
	create := func(uint64, uint64) sm.IOnDiskStateMachine { return store }
	if err := nh.StartOnDiskReplica(nil, false, create, h.replicaConfig(shard)); err != nil {
		nh.Close()
		_ = store.Close()
		return fmt.Errorf("raftgroups: force recover group %d: start: %w", n, err)
	}
	// The replica replays its committed log on its own, membership
	// included; exporting before the membership is replayed makes
	// dragonboat panic (empty membership), so wait for it.
	if err := waitMembershipReplayed(nh, shard, time.Minute); err != nil {
		nh.Close()
		_ = store.Close()
		return fmt.Errorf("raftgroups: force recover group %d: %w", n, err)
	}
	export := filepath.Join(dir, "recover-export")
	_ = os.RemoveAll(export)
	if err := os.MkdirAll(export, 0o755); err != nil {
		nh.Close()
		_ = store.Close()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	index, err := nh.SyncRequestSnapshot(ctx, shard, dragonboat.SnapshotOption{Exported: true, ExportPath: export})
	cancel()
	applied := store.Applied()
	nh.Close()
	_ = store.Close()
	if err != nil {
		return fmt.Errorf("raftgroups: force recover group %d: export snapshot: %w", n, err)
	}
	src, err := snapshotDir(export)
	if err != nil {
		return fmt.Errorf("raftgroups: force recover group %d: %w", n, err)
	}
	if err := tools.ImportSnapshot(nhc, src, map[uint64]string{h.cfg.NodeID: self}, h.cfg.NodeID); err != nil {
		return fmt.Errorf("raftgroups: force recover group %d: import snapshot: %w", n, err)
	}
	if err := os.WriteFile(marker, []byte(fmt.Sprintf("index=%d at=%s\n", index, time.Now().UTC().Format(time.RFC3339))), 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(export)
	h.log.Error("raft: FORCE RECOVER: group rebuilt as a one-voter cluster of this node from its own data; "+
		"every other member is dropped, entries this node had not applied are lost; re-add the others as new empty nodes "+
		"with new ids, and unset QUEEN_RAFT_FORCE_RECOVER",
		"group", n, "node", h.cfg.NodeID, "snapshot_index", index, "applied", applied)
	return nil
}

// waitMembershipReplayed polls until the replica of shard has applied a
// membership (its last config change index is known).
func waitMembershipReplayed(nh *dragonboat.NodeHost, shard uint64, budget time.Duration) error {
	deadline := time.Now().Add(budget)
	for {
		for _, si := range nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true}).ShardInfoList {
			if si.ShardID == shard && !si.Pending && si.ConfigChangeIndex > 0 && len(si.Replicas) > 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica did not replay its membership within %v", budget)
		}
		time.Sleep(20 * time.Millisecond) // boot-time wait on dragonboat's own replay; nothing to be notified by
	}
}

// snapshotDir is the one snapshot directory an export wrote.
func snapshotDir(export string) (string, error) {
	entries, err := os.ReadDir(export)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "snapshot-") {
			return filepath.Join(export, e.Name()), nil
		}
	}
	return "", fmt.Errorf("no snapshot in %s", export)
}
