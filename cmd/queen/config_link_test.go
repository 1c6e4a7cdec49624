package main

import (
	"strings"
	"testing"
)

func TestLinkTokenConfig(t *testing.T) {
	c, err := loadConfig(lookup(map[string]string{"QUEEN_RAFT_TOKEN": "raft-t0ken", "QUEEN_LINK_TOKEN": "link-t0ken"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Raft.LinkToken != "link-t0ken" {
		t.Fatalf("link token %q", c.Raft.LinkToken)
	}
	for name, env := range map[string]map[string]string{
		"equal to the raft token": {"QUEEN_RAFT_TOKEN": "same", "QUEEN_LINK_TOKEN": "same"},
		"equal to a rotated one":  {"QUEEN_RAFT_TOKEN": "new", "QUEEN_RAFT_TOKEN_ACCEPT": "old", "QUEEN_LINK_TOKEN": "old"},
	} {
		if _, err := loadConfig(lookup(env)); err == nil || !strings.HasPrefix(err.Error(), "QUEEN_LINK_TOKEN:") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
