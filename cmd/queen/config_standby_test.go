package main

import (
	"log/slog"
	"strings"
	"testing"
)

func TestStandbyConfig(t *testing.T) {
	c, err := loadConfig(lookup(map[string]string{"QUEEN_STANDBY_OF": " 10.0.0.1:7400, 10.0.0.2:7400 ", "QUEEN_LINK_TOKEN": "link-t0ken"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Raft.StandbyOf, ","); got != "10.0.0.1:7400,10.0.0.2:7400" || c.StandbyGroupsSet {
		t.Fatalf("standby of %q, groups set %v", got, c.StandbyGroupsSet)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_STANDBY_OF": "10.0.0.1:7400", "QUEEN_LINK_TOKEN": "link-t0ken", "QUEEN_RAFT_GROUPS": "3"}))
	if err != nil || !c.StandbyGroupsSet {
		t.Fatalf("explicit groups: %v %v", c.StandbyGroupsSet, err)
	}
	for name, env := range map[string]map[string]string{
		"without a link token": {"QUEEN_STANDBY_OF": "10.0.0.1:7400"},
		"not an address":       {"QUEEN_STANDBY_OF": "nohost", "QUEEN_LINK_TOKEN": "link-t0ken"},
	} {
		if _, err := loadConfig(lookup(env)); err == nil || !strings.HasPrefix(err.Error(), "QUEEN_STANDBY_OF:") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if c, err := loadConfig(lookup(map[string]string{})); err != nil || len(c.Raft.StandbyOf) != 0 {
		t.Fatalf("no standby: %v %v", c.Raft.StandbyOf, err)
	}
}

// TestStandbyGroupsUnreachableSource: with the source unreachable at
// boot, an explicit QUEEN_RAFT_GROUPS is used as given and without one the
// node refuses to start, saying how to start it.
func TestStandbyGroupsUnreachableSource(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	c, err := loadConfig(lookup(map[string]string{"QUEEN_STANDBY_OF": "127.0.0.1:1", "QUEEN_LINK_TOKEN": "link-t0ken", "QUEEN_RAFT_GROUPS": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := standbyGroups(log, &c, c.StandbyGroupsSet); err != nil || c.Raft.Groups != 3 {
		t.Fatalf("explicit groups, source down: %d %v", c.Raft.Groups, err)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_STANDBY_OF": "127.0.0.1:1", "QUEEN_LINK_TOKEN": "link-t0ken"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := standbyGroups(log, &c, c.StandbyGroupsSet); err == nil || !strings.Contains(err.Error(), "set QUEEN_RAFT_GROUPS") {
		t.Fatalf("no groups, source down: %v", err)
	}
}
