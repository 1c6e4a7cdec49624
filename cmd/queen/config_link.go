package main

import (
	"log/slog"

	"github.com/queen-mq/queen/crypto/secret"
	"github.com/queen-mq/queen/raftgroups"
)

// The link token lets a standby cluster read this cluster's raft groups
// (committed entries and snapshots, read-only) on the raft port; a standby
// sets the same value to present it (docs/standby.md).
func init() {
	settingDocs["QUEEN_LINK_TOKEN"] = settingDoc{doc: "token a standby presents to read this cluster's log and snapshots on the raft port " +
		"(unset: no link route); a standby sets the same value; never equal to a raft token", secret: true}
}

// linkConfig reads QUEEN_LINK_TOKEN into r. A link token equal to the raft
// token, or to one accepted while it is rotated, is refused: the link only
// reads, the raft token votes and appends, and one secret must not carry
// both (the transport also refuses either token in the other's place).
func (e *env) linkConfig(r *raftgroups.Config) {
	r.LinkToken = e.lookup("QUEEN_LINK_TOKEN")
	if r.LinkToken == "" {
		return
	}
	for _, raft := range append([]string{r.Token}, r.AcceptTokens...) {
		if secret.Equal(r.LinkToken, raft) {
			e.fail("QUEEN_LINK_TOKEN", "equals QUEEN_RAFT_TOKEN or a token of QUEEN_RAFT_TOKEN_ACCEPT: "+
				"a standby's read-only link token must not also open raft (votes, appends, snapshots); choose another")
			return
		}
	}
}

// logLink states whether this node serves the link, the token masked.
func logLink(log *slog.Logger, r raftgroups.Config) {
	if r.LinkToken == "" {
		log.Info("config: link", "serving", false, "note", "no standby can read this node (QUEEN_LINK_TOKEN unset)")
		return
	}
	log.Info("config: link", "serving", true, "link_token", secret.Mask(r.LinkToken),
		"routes", "/link/v1/ on every raft group's listener", "tls", r.TLS != nil)
}
