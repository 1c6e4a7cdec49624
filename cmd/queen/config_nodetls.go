package main

import (
	"log/slog"
	"time"

	"github.com/queen-mq/queen/crypto/nodetls"
)

// nodeTLS reads TLS between nodes (QUEEN_RAFT_TLS_CERT, _KEY, _CA) and
// loads the files now, so a half or unreadable configuration stops the
// boot with one line instead of the node running in plaintext or being
// refused by every peer.
func (e *env) nodeTLS() *nodetls.Config {
	c, err := nodetls.Load(nodetls.Files{
		Cert: e.str("QUEEN_RAFT_TLS_CERT", ""),
		Key:  e.str("QUEEN_RAFT_TLS_KEY", ""),
		CA:   e.str("QUEEN_RAFT_TLS_CA", ""),
	})
	if err != nil && e.err == nil {
		e.err = err // names its variable already
	}
	return c
}

// logNodeTLS states the mode of TLS between nodes. The paths are logged,
// never the key's content.
func logNodeTLS(log *slog.Logger, c *nodetls.Config) {
	if c == nil {
		log.Info("config: node_tls", "mode", c.Mode(), "note", "raft and node-to-node traffic is plaintext (QUEEN_RAFT_TLS_CERT unset)")
		return
	}
	f := c.Files()
	log.Info("config: node_tls", "mode", c.Mode(), "cert", f.Cert, "key", f.Key, "ca", orNone(f.CA),
		"subject", c.Subject(), "not_after", c.NotAfter().UTC().Format(time.RFC3339))
	if !c.Mutual() {
		log.Warn("config: TLS between nodes without QUEEN_RAFT_TLS_CA: peers are not asked for certificates, " +
			"and theirs are checked against the system roots; QUEEN_RAFT_TOKEN alone decides who may talk raft")
	}
	if time.Until(c.NotAfter()) < 30*24*time.Hour {
		log.Warn("config: this node's QUEEN_RAFT_TLS_CERT expires within 30 days; rotate it by a rolling restart",
			"not_after", c.NotAfter().UTC().Format(time.RFC3339))
	}
}
