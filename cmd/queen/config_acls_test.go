package main

import (
	"slices"
	"strings"
	"testing"
)

// TestACLConfig: ACLs are off by default; on, the super users are read
// (commas or semicolons); super users without ACLs, or not principals,
// stop the boot.
func TestACLConfig(t *testing.T) {
	c, err := loadConfig(lookup(map[string]string{}))
	if err != nil || c.ACLs.Enabled || len(c.ACLs.SuperUsers) != 0 {
		t.Fatalf("default: %v %+v", err, c.ACLs)
	}
	c, err = loadConfig(lookup(map[string]string{"QUEEN_ACLS": "true", "QUEEN_ACL_SUPER_USERS": "User:admin; User:ops,User:root"}))
	if err != nil || !c.ACLs.Enabled || !slices.Equal(c.ACLs.SuperUsers, []string{"User:admin", "User:ops", "User:root"}) {
		t.Fatalf("on: %v %+v", err, c.ACLs)
	}
	for name, env := range map[string]map[string]string{
		"super users without ACLs": {"QUEEN_ACL_SUPER_USERS": "User:admin"},
		"not a principal":          {"QUEEN_ACLS": "true", "QUEEN_ACL_SUPER_USERS": "admin"},
		"not a bool":               {"QUEEN_ACLS": "maybe"},
	} {
		if _, err := loadConfig(lookup(env)); err == nil || !strings.HasPrefix(err.Error(), "QUEEN_ACL") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
