package raftgroups_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/tenancy/acl"
)

// TestACLStore: bindings are kept per tenant, adding one twice keeps one,
// every change bumps the generation and nothing else does, and a change
// larger than one KV command goes in several.
func TestACLStore(t *testing.T) {
	_, e := raftgroupstest.Start(t)
	s := e.ACLStore()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gen := func() uint64 {
		t.Helper()
		g, err := s.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := gen(); g != 0 {
		t.Fatalf("empty store at generation %d", g)
	}
	b := func(name string) acl.Binding {
		return acl.Binding{Resource: acl.ResourceTopic, Name: name, Pattern: acl.PatternLiteral, Principal: "User:u", Host: "*", Op: acl.OpRead, Perm: acl.PermAllow}
	}
	const ta, tb = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"
	if err := s.Change(ctx, ta, []acl.Binding{b("x"), b("x"), b("y")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Change(ctx, tb, []acl.Binding{b("x")}, nil); err != nil {
		t.Fatal(err)
	}
	g1 := gen()
	if g1 == 0 || gen() != g1 {
		t.Fatalf("generation %d after two changes, then %d", g1, gen())
	}
	g, all, err := s.Load(ctx)
	if err != nil || g != g1 || len(all[ta]) != 2 || len(all[tb]) != 1 {
		t.Fatalf("load: %v gen %d, %v", err, g, all)
	}
	if err := s.Change(ctx, ta, nil, []acl.Binding{b("x")}); err != nil {
		t.Fatal(err)
	}
	if _, all, _ := s.Load(ctx); len(all[ta]) != 1 || all[ta][0].Name != "y" || len(all[tb]) != 1 {
		t.Fatalf("after removing x from %s: %v", ta, all)
	}
	many := make([]acl.Binding, 600)
	for i := range many {
		many[i] = b(fmt.Sprint("m", i))
	}
	if err := s.Change(ctx, tb, many, nil); err != nil {
		t.Fatal(err)
	}
	if _, all, _ := s.Load(ctx); len(all[tb]) != 601 {
		t.Fatalf("600 added in one change: %d stored", len(all[tb]))
	}
}
