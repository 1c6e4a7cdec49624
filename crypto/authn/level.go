package authn

import (
	"fmt"
	"strings"
	"time"
)

// Level is the access level a route requires (spec §2.2).
type Level uint8

// The five access levels.
const (
	LevelPublic Level = iota
	LevelReadOnly
	LevelWriteOnly
	LevelReadWrite
	LevelAdmin
)

var levelNames = [...]string{
	LevelPublic:    "public",
	LevelReadOnly:  "read-only",
	LevelWriteOnly: "write-only",
	LevelReadWrite: "read-write",
	LevelAdmin:     "admin",
}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// ParseLevel parses a level name as String prints it.
func ParseLevel(s string) (Level, error) {
	for l, name := range levelNames {
		if s == name {
			return Level(l), nil
		}
	}
	return 0, fmt.Errorf("authn: unknown access level %q", s)
}

// Role is one of the four roles a token can carry. The names a token uses for
// them are configurable (Config.RoleAdmin and friends).
type Role uint8

// The four roles.
const (
	RoleReadOnly Role = iota
	RoleWriteOnly
	RoleReadWrite
	RoleAdmin
	numRoles
)

var roleNames = [...]string{
	RoleReadOnly:  "read-only",
	RoleWriteOnly: "write-only",
	RoleReadWrite: "read-write",
	RoleAdmin:     "admin",
}

func (r Role) String() string {
	if r < numRoles {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// RoleSet is a set of roles. The zero RoleSet is empty.
type RoleSet uint8

// Roles returns the set holding rs.
func Roles(rs ...Role) RoleSet {
	var s RoleSet
	for _, r := range rs {
		s = s.With(r)
	}
	return s
}

// With returns s plus r.
func (s RoleSet) With(r Role) RoleSet {
	if r >= numRoles {
		return s
	}
	return s | 1<<r
}

// Has reports whether r is in s.
func (s RoleSet) Has(r Role) bool { return r < numRoles && s&(1<<r) != 0 }

// Empty reports whether s holds no role.
func (s RoleSet) Empty() bool { return s == 0 }

func (s RoleSet) String() string {
	var names []string
	for r := Role(0); r < numRoles; r++ {
		if s.Has(r) {
			names = append(names, r.String())
		}
	}
	return "{" + strings.Join(names, ",") + "}"
}

// passes lists, for each level, the roles that pass it (spec §2.2).
var passes = [...]RoleSet{
	LevelPublic:    0, // everyone, handled in Allows
	LevelReadOnly:  Roles(RoleReadOnly, RoleReadWrite, RoleAdmin),
	LevelWriteOnly: Roles(RoleWriteOnly, RoleReadWrite, RoleAdmin),
	LevelReadWrite: Roles(RoleReadWrite, RoleAdmin),
	LevelAdmin:     Roles(RoleAdmin),
}

// Allows reports whether a holder of the roles in s may use a route of level
// l: public passes everyone (even no role at all); otherwise any one role in s
// that passes l is enough. An unknown level passes no one.
func (s RoleSet) Allows(l Level) bool {
	if l == LevelPublic {
		return true
	}
	if int(l) >= len(passes) {
		return false
	}
	return s&passes[l] != 0
}

// Principal is the verified caller.
type Principal struct {
	// Subject is the token's "sub" claim ("" when absent).
	Subject string
	// Roles are the roles the token's role claims name; names that match no
	// configured role are ignored.
	Roles RoleSet
	// Expires is when Verify stops accepting the token: its "exp" plus
	// ClockSkew. Zero for a token without "exp". A Kafka session lasts
	// until then.
	Expires time.Time
	// Tenant is the token's tenant claim (JWT_TENANT_CLAIM), unparsed; ""
	// when absent. A claim present but not a non-empty string refuses the
	// token. Whoever scopes by tenant checks it.
	Tenant string
}

// Allows reports whether p may use a route of level l (see RoleSet.Allows).
func (p Principal) Allows(l Level) bool { return p.Roles.Allows(l) }
