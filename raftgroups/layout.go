package raftgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// layoutFile records, in QUEEN_RAFT_DIR, the data layout and the placement
// rule a node's data was written with.
const layoutFile = "PLACEMENT"

// layoutVersion names the layout: partitions spread over groups, a queue's
// catalog at its home (docs/placement.md).
const layoutVersion = "queen-placement-1"

// checkLayout refuses a data dir written by another layout or placement
// rule, and records them in a new one. A dir with raft data but no record
// was written by the layout before placement (a tenant's whole data in one
// group): it is refused, not migrated (docs/placement.md says why).
func checkLayout(dir, placement string) error {
	want := layoutVersion + " " + placement + "\n"
	path := filepath.Join(dir, layoutFile)
	got, err := os.ReadFile(path)
	switch {
	case err == nil:
		if string(got) == want {
			return nil
		}
		return fmt.Errorf("raftgroups: %s was written with placement %q, this node is configured with %q: "+
			"data placed by the old rule would not be found; start with the same QUEEN_RAFT_GROUPS and QUEEN_TENANT_GROUPS, or an empty QUEEN_RAFT_DIR",
			dir, strings.TrimSpace(string(got)), strings.TrimSpace(want))
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("raftgroups: read %s: %w", path, err)
	}
	for _, old := range []string{"raft", "store", "groups"} {
		if _, err := os.Stat(filepath.Join(dir, old)); err == nil {
			return fmt.Errorf("raftgroups: %s holds data written before partitions were spread over raft groups "+
				"(a tenant's data in one group); this build does not read it: start with an empty QUEEN_RAFT_DIR", dir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("raftgroups: create %s: %w", dir, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(want), 0o644); err != nil {
		return fmt.Errorf("raftgroups: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("raftgroups: write %s: %w", path, err)
	}
	return nil
}

// RecordedGroups is the raft group count dir's data was written with, from
// its layout record; false when dir holds no record (a new node). A node
// started without QUEEN_RAFT_GROUPS on existing data runs this count: the
// default, from the cores and the cluster size, may have changed since
// (another machine, a promoted standby that ran its source's count), and
// the data is only found with the count it was placed by.
func RecordedGroups(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, layoutFile))
	if err != nil {
		return 0, false
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "groups="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n, true
			}
		}
	}
	return 0, false
}
