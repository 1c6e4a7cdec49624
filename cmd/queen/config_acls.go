package main

import (
	"log/slog"

	"github.com/queen-mq/queen/tenancy/acl"
)

// ACLs (docs/acls.md): off by default; on, every Kafka request (and every
// HTTP request on a queue or consumer group) is checked against the
// replicated ACL bindings, below the JWT role ceiling, and the super users
// are allowed everything.
func init() {
	settingDocs["QUEEN_ACLS"] = settingDoc{doc: "turn ACLs on (Kafka's model, both doors; off: the ACL APIs answer SECURITY_DISABLED " +
		"and nothing is checked); see docs/acls.md"}
	settingDocs["QUEEN_ACL_SUPER_USERS"] = settingDoc{doc: "principals allowed everything when ACLs are on, comma- or " +
		"semicolon-separated (Kafka's super.users), e.g. User:admin"}
}

// ACLConfig is QUEEN_ACLS and QUEEN_ACL_SUPER_USERS, read into the one
// config; main builds the node's acl.Authorizer from it.
type ACLConfig struct {
	Enabled    bool
	SuperUsers []string
}

// aclConfig reads the ACL settings. Super users without ACLs on are
// refused: the operator expects them to mean something.
func (e *env) aclConfig() ACLConfig {
	c := ACLConfig{Enabled: e.bool("QUEEN_ACLS", false)}
	raw := e.str("QUEEN_ACL_SUPER_USERS", "")
	su, err := acl.ParseSuperUsers(raw)
	if err != nil {
		e.fail("QUEEN_ACL_SUPER_USERS", "%v", err)
		return c
	}
	if len(su) > 0 && !c.Enabled {
		e.fail("QUEEN_ACL_SUPER_USERS", "is set but QUEEN_ACLS is not true: super users only mean something with ACLs on")
		return c
	}
	c.SuperUsers = su
	return c
}

// logACLs states at boot whether ACLs are on and who the super users are.
func logACLs(log *slog.Logger, c ACLConfig) {
	if !c.Enabled {
		log.Info("config: acls", "enabled", false, "note", "no ACL is checked; the ACL APIs answer SECURITY_DISABLED (QUEEN_ACLS=true turns them on)")
		return
	}
	log.Info("config: acls", "enabled", true, "super_users", c.SuperUsers,
		"note", "a request no ALLOW binding matches is refused (JWT roles stay a ceiling)")
}

// newAuthorizer is the node's one Authorizer, for both doors.
func newAuthorizer(c ACLConfig, store acl.Store, log *slog.Logger) *acl.Authorizer {
	return acl.New(acl.Config{Enabled: c.Enabled, SuperUsers: c.SuperUsers, Store: store, Logger: log})
}
