package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A data dir keeps the raft group count it was written with when
// QUEEN_RAFT_GROUPS is not given: a promoted standby ran its source's
// count, and a node on a machine with more cores gets another default,
// and either would otherwise be refused on its own data.
func TestRecordedGroupCountIsTheDefault(t *testing.T) {
	dir := t.TempDir()
	c, err := loadConfig(lookup(map[string]string{"QUEEN_RAFT_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	fresh := c.Raft.Groups
	recorded := fresh + 3
	if err := os.WriteFile(filepath.Join(dir, "PLACEMENT"), []byte("queen-placement-1 groups="+strconv.Itoa(recorded)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_RAFT_DIR": dir}))
	if err != nil || c.Raft.Groups != recorded {
		t.Fatalf("groups on a dir written with %d: %d %v", recorded, c.Raft.Groups, err)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_RAFT_DIR": dir, "QUEEN_RAFT_GROUPS": "2"}))
	if err != nil || c.Raft.Groups != 2 {
		t.Fatalf("an explicit QUEEN_RAFT_GROUPS still wins (the layout check then refuses it): %d %v", c.Raft.Groups, err)
	}

	// A standby restarted while its source is down runs its data's count.
	c, err = loadConfig(lookup(map[string]string{"QUEEN_RAFT_DIR": dir, "QUEEN_STANDBY_OF": "127.0.0.1:1", "QUEEN_LINK_TOKEN": "link-t0ken"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := standbyGroups(slog.New(slog.DiscardHandler), &c, c.StandbyGroupsSet); err != nil || c.Raft.Groups != recorded {
		t.Fatalf("standby with its source down on a dir written with %d: %d %v", recorded, c.Raft.Groups, err)
	}
}
