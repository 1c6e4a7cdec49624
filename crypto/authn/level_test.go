package authn

import "testing"

// The §2.2 table, written out by hand rather than derived from passes.
var wantAllows = map[Role]map[Level]bool{
	RoleAdmin:     {LevelPublic: true, LevelReadOnly: true, LevelWriteOnly: true, LevelReadWrite: true, LevelAdmin: true},
	RoleReadWrite: {LevelPublic: true, LevelReadOnly: true, LevelWriteOnly: true, LevelReadWrite: true, LevelAdmin: false},
	RoleReadOnly:  {LevelPublic: true, LevelReadOnly: true, LevelWriteOnly: false, LevelReadWrite: false, LevelAdmin: false},
	RoleWriteOnly: {LevelPublic: true, LevelReadOnly: false, LevelWriteOnly: true, LevelReadWrite: false, LevelAdmin: false},
}

var allLevels = []Level{LevelPublic, LevelReadOnly, LevelWriteOnly, LevelReadWrite, LevelAdmin}

func TestAllowsSingleRole(t *testing.T) {
	for r, row := range wantAllows {
		for _, l := range allLevels {
			if got := (Principal{Roles: Roles(r)}).Allows(l); got != row[l] {
				t.Errorf("role %v at level %v: Allows = %v, want %v", r, l, got, row[l])
			}
		}
	}
}

func TestAllowsNoRoleAndUnknownLevel(t *testing.T) {
	var p Principal
	for _, l := range allLevels {
		if got, want := p.Allows(l), l == LevelPublic; got != want {
			t.Errorf("no role at %v: Allows = %v, want %v", l, got, want)
		}
	}
	if (Principal{Roles: Roles(RoleAdmin)}).Allows(Level(99)) {
		t.Error("an unknown level must fail closed")
	}
}

func TestAllowsSeveralRoles(t *testing.T) {
	// Set semantics: read-only + write-only passes both single levels but not
	// read-write, which needs the read-write (or admin) role itself.
	p := Principal{Roles: Roles(RoleReadOnly, RoleWriteOnly)}
	for l, want := range map[Level]bool{
		LevelPublic: true, LevelReadOnly: true, LevelWriteOnly: true, LevelReadWrite: false, LevelAdmin: false,
	} {
		if got := p.Allows(l); got != want {
			t.Errorf("{read-only,write-only} at %v: Allows = %v, want %v", l, got, want)
		}
	}
	// Every combination of roles: passes iff some member passes alone.
	for s := RoleSet(0); s < 1<<numRoles; s++ {
		for _, l := range allLevels {
			want := l == LevelPublic
			for r := Role(0); r < numRoles; r++ {
				if s.Has(r) && wantAllows[r][l] {
					want = true
				}
			}
			if got := s.Allows(l); got != want {
				t.Errorf("%v at %v: Allows = %v, want %v", s, l, got, want)
			}
		}
	}
}

func TestLevelAndRoleNames(t *testing.T) {
	for _, l := range allLevels {
		back, err := ParseLevel(l.String())
		if err != nil || back != l {
			t.Errorf("ParseLevel(%q) = %v, %v", l.String(), back, err)
		}
	}
	if _, err := ParseLevel("superuser"); err == nil {
		t.Error("ParseLevel accepted an unknown name")
	}
	if got := Roles(RoleAdmin, RoleReadOnly).String(); got != "{read-only,admin}" {
		t.Errorf("RoleSet.String = %q", got)
	}
	if Roles(Role(7)).Has(Role(7)) {
		t.Error("an out-of-range role was added")
	}
}
