package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
)

// A standby cluster follows a source cluster's raft groups over the
// source's raft port (docs/standby.md): QUEEN_STANDBY_OF names the
// source's nodes, QUEEN_LINK_TOKEN (config_link.go) is the token the
// source accepts for its link.
func init() {
	settingDocs["QUEEN_STANDBY_OF"] = settingDoc{doc: "comma-separated raft addresses (host:port of group 0) of a source cluster's nodes: " +
		"this cluster follows it read-only as a standby until promoted (needs QUEEN_LINK_TOKEN; raft group count from the source)"}
}

// standbyConfig reads QUEEN_STANDBY_OF into r. groupsSet says whether
// QUEEN_RAFT_GROUPS was given: a standby runs the source's group count,
// and a different explicit one is refused at boot (standbyGroups).
func (e *env) standbyConfig(r *raftgroups.Config) (groupsSet bool) {
	v := e.lookup("QUEEN_STANDBY_OF")
	if v == "" {
		return false
	}
	addrs, err := raftgroups.StandbyOf(v)
	if err != nil {
		e.fail("QUEEN_STANDBY_OF", "%v", err)
		return false
	}
	r.StandbyOf = addrs
	if r.LinkToken == "" {
		e.fail("QUEEN_STANDBY_OF", "needs QUEEN_LINK_TOKEN: the token the source accepts for its link")
	}
	return e.get("QUEEN_RAFT_GROUPS") != ""
}

// standbyGroups sets a standby's raft group count to its source's, asked
// over the link at boot. An explicit QUEEN_RAFT_GROUPS that differs is
// refused; with the source unreachable (a standby restarted while its
// source is down, perhaps to be promoted), an explicit QUEEN_RAFT_GROUPS
// or the count its data dir was written with is used as it is, and
// without either (a new node) the node refuses to start.
func standbyGroups(log *slog.Logger, cfg *Config, groupsSet bool) error {
	r := &cfg.Raft
	if len(r.StandbyOf) == 0 {
		return nil
	}
	_, recorded := raftgroups.RecordedGroups(r.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, err := raftgroups.SourceGroups(ctx, r.StandbyOf, r.LinkToken, r.TLS)
	switch {
	case err != nil && groupsSet:
		log.Warn("boot: standby: the source did not answer; running the QUEEN_RAFT_GROUPS given, which must be the source's",
			"groups", r.Groups, "err", err)
		return nil
	case err != nil && recorded:
		log.Warn("boot: standby: the source did not answer; running the raft group count this data dir was written with",
			"groups", r.Groups, "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("standby: cannot ask the source %s its raft group count (%w); set QUEEN_RAFT_GROUPS to it to start without the source",
			strings.Join(r.StandbyOf, ","), err)
	case groupsSet && n != r.Groups:
		return fmt.Errorf("standby: QUEEN_RAFT_GROUPS=%d, the source runs %d raft groups: a standby runs its source's; unset QUEEN_RAFT_GROUPS or set it to %d",
			r.Groups, n, n)
	}
	if n != r.Groups {
		p, err := tenancy.NewPlacement(n, cfg.TenantGroups)
		if err != nil {
			return fmt.Errorf("standby: placement over the source's %d groups: %w", n, err)
		}
		r.Groups, cfg.Placement, r.Placement = n, p, p.Spec()
	}
	log.Info("boot: standby of "+strings.Join(r.StandbyOf, ",")+": following it read-only until promoted",
		"groups", strconv.Itoa(r.Groups))
	return nil
}
