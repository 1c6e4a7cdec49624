package acl

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

const (
	tA = "00000000-0000-0000-0000-00000000000a"
	tB = "00000000-0000-0000-0000-00000000000b"
)

func allow(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	return Binding{Resource: rt, Name: name, Pattern: pt, Principal: principal, Host: WildcardHost, Op: op, Perm: PermAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	b := allow(rt, name, pt, principal, op)
	b.Perm = PermDeny
	return b
}

func newAuth(t testing.TB, super ...string) *Authorizer {
	t.Helper()
	return New(Config{Enabled: true, SuperUsers: super, Store: NewMemStore()})
}

func mustCreate(t testing.TB, a *Authorizer, tenant string, bs ...Binding) {
	t.Helper()
	if err := a.Create(context.Background(), tenant, bs); err != nil {
		t.Fatal(err)
	}
}

func req(principal string, rt ResourceType, name string, op Operation) Request {
	return Request{Tenant: tA, Principal: principal, Host: "10.0.0.1", Resource: rt, Name: name, Op: op}
}

func TestAllowedPatterns(t *testing.T) {
	a := newAuth(t)
	mustCreate(t, a, tA,
		allow(ResourceTopic, "orders.", PatternPrefixed, "User:alice", OpWrite),
		allow(ResourceTopic, "audit", PatternLiteral, "User:alice", OpRead),
		allow(ResourceGroup, WildcardName, PatternLiteral, "User:alice", OpRead),
	)
	cases := []struct {
		r    Request
		want bool
	}{
		{req("User:alice", ResourceTopic, "orders.x", OpWrite), true},
		{req("User:alice", ResourceTopic, "orders.", OpWrite), true},
		{req("User:alice", ResourceTopic, "orders", OpWrite), false},
		{req("User:alice", ResourceTopic, "payments", OpWrite), false},
		{req("User:alice", ResourceTopic, "orders.x", OpRead), false},
		{req("User:alice", ResourceTopic, "audit", OpRead), true},
		{req("User:alice", ResourceTopic, "audit2", OpRead), false},
		{req("User:alice", ResourceGroup, "any-group", OpRead), true},
		{req("User:bob", ResourceTopic, "orders.x", OpWrite), false},
		{req("User:alice", ResourceTransactionalID, "orders.x", OpWrite), false},
	}
	for _, c := range cases {
		if got := a.Allowed(c.r); got != c.want {
			t.Errorf("%+v: got %v want %v", c.r, got, c.want)
		}
	}
}

func TestDenyBeatsAllow(t *testing.T) {
	a := newAuth(t)
	mustCreate(t, a, tA,
		allow(ResourceTopic, "orders.", PatternPrefixed, "User:alice", OpWrite),
		allow(ResourceTopic, WildcardName, PatternLiteral, WildcardPrincipal, OpAll),
		deny(ResourceTopic, "orders.secret", PatternLiteral, "User:alice", OpWrite),
		deny(ResourceTopic, "x", PatternPrefixed, WildcardPrincipal, OpAll),
	)
	for _, c := range []struct {
		r    Request
		want bool
	}{
		{req("User:alice", ResourceTopic, "orders.x", OpWrite), true},
		{req("User:alice", ResourceTopic, "orders.secret", OpWrite), false},
		{req("User:alice", ResourceTopic, "orders.secret", OpRead), true}, // ALL for User:*
		{req("User:bob", ResourceTopic, "xyz", OpRead), false},
		{req("User:bob", ResourceTopic, "yz", OpRead), true},
	} {
		if got := a.Allowed(c.r); got != c.want {
			t.Errorf("%+v: got %v want %v", c.r, got, c.want)
		}
	}
}

func TestImpliedOperations(t *testing.T) {
	a := newAuth(t)
	for i, op := range []Operation{OpRead, OpWrite, OpDelete, OpAlter, OpAlterConfigs, OpCreate} {
		mustCreate(t, a, tA, allow(ResourceTopic, fmt.Sprint("t", i), PatternLiteral, "User:u", op))
	}
	for i, c := range []struct{ describe, describeConfigs bool }{
		{true, false}, {true, false}, {true, false}, {true, false}, {false, true}, {false, false},
	} {
		name := fmt.Sprint("t", i)
		if got := a.Allowed(req("User:u", ResourceTopic, name, OpDescribe)); got != c.describe {
			t.Errorf("%s DESCRIBE: got %v", name, got)
		}
		if got := a.Allowed(req("User:u", ResourceTopic, name, OpDescribeConfigs)); got != c.describeConfigs {
			t.Errorf("%s DESCRIBE_CONFIGS: got %v", name, got)
		}
	}
	// A DENY of WRITE does not deny DESCRIBE, which READ still grants.
	mustCreate(t, a, tA, allow(ResourceTopic, "d", PatternLiteral, "User:u", OpRead), deny(ResourceTopic, "d", PatternLiteral, "User:u", OpWrite))
	if !a.Allowed(req("User:u", ResourceTopic, "d", OpDescribe)) {
		t.Error("DENY WRITE denied DESCRIBE")
	}
	// ALL grants every operation, and a DENY of ALL denies every one.
	mustCreate(t, a, tA, allow(ResourceCluster, ClusterName, PatternLiteral, "User:ops", OpAll))
	for _, op := range []Operation{OpAlter, OpDescribe, OpCreate, OpIdempotentWrite, OpClusterAction} {
		if !a.Allowed(req("User:ops", ResourceCluster, ClusterName, op)) {
			t.Errorf("ALL does not grant %s", op)
		}
	}
	mustCreate(t, a, tA, deny(ResourceCluster, ClusterName, PatternLiteral, "User:ops", OpAll))
	if a.Allowed(req("User:ops", ResourceCluster, ClusterName, OpDescribe)) {
		t.Error("DENY ALL does not deny DESCRIBE")
	}
}

func TestSuperUsersAndDisabled(t *testing.T) {
	a := newAuth(t, "User:admin")
	mustCreate(t, a, tA, deny(ResourceTopic, WildcardName, PatternLiteral, WildcardPrincipal, OpAll))
	if !a.Allowed(req("User:admin", ResourceTopic, "anything", OpDelete)) {
		t.Error("super user refused")
	}
	if a.Allowed(req("User:other", ResourceTopic, "anything", OpDescribe)) {
		t.Error("deny-all let a user in")
	}
	var nilAuth *Authorizer
	off := New(Config{Store: NewMemStore()})
	for _, x := range []*Authorizer{nilAuth, off} {
		if x.Enabled() || !x.Allowed(req("User:x", ResourceTopic, "t", OpWrite)) {
			t.Error("a disabled authorizer refused")
		}
		if err := x.Create(context.Background(), tA, nil); !errors.Is(err, ErrDisabled) {
			t.Errorf("disabled Create: %v", err)
		}
	}
	su, err := ParseSuperUsers(" User:admin; User:ops ,")
	if err != nil || len(su) != 2 || su[1] != "User:ops" {
		t.Fatalf("ParseSuperUsers: %v %v", su, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Error("a super user without a type was accepted")
	}
}

func TestHostMatching(t *testing.T) {
	a := newAuth(t)
	b := allow(ResourceTopic, "t", PatternLiteral, "User:u", OpRead)
	b.Host = "10.0.0.1"
	mustCreate(t, a, tA, b)
	r := req("User:u", ResourceTopic, "t", OpRead)
	if !a.Allowed(r) {
		t.Error("host-bound allow refused its host")
	}
	r.Host = "10.0.0.2"
	if a.Allowed(r) {
		t.Error("host-bound allow granted another host")
	}
	d := deny(ResourceTopic, "t", PatternLiteral, "User:u", OpRead)
	d.Host = "10.0.0.1"
	mustCreate(t, a, tA, d)
	r.Host = "10.0.0.1"
	if a.Allowed(r) {
		t.Error("host-bound deny did not deny")
	}
}

func TestTenantIsolation(t *testing.T) {
	a := newAuth(t)
	mustCreate(t, a, tA, allow(ResourceTopic, "t", PatternLiteral, "User:u", OpRead))
	r := req("User:u", ResourceTopic, "t", OpRead)
	r.Tenant = tB
	if a.Allowed(r) {
		t.Error("tenant A's binding granted in tenant B")
	}
	if got := a.Describe(tB, Filter{Resource: ResourceAny, Pattern: PatternAny, Op: OpAny, Perm: PermAny}); len(got) != 0 {
		t.Errorf("tenant B sees %v", got)
	}
	got, err := a.Delete(context.Background(), tB, []Filter{{Resource: ResourceAny, Pattern: PatternAny, Op: OpAny, Perm: PermAny}})
	if err != nil || len(got[0]) != 0 {
		t.Fatalf("tenant B deleted %v %v", got, err)
	}
	if !a.Allowed(req("User:u", ResourceTopic, "t", OpRead)) {
		t.Error("tenant B's delete removed tenant A's binding")
	}
}

func TestFilters(t *testing.T) {
	a := newAuth(t)
	lit := allow(ResourceTopic, "orders.x", PatternLiteral, "User:u", OpWrite)
	pre := allow(ResourceTopic, "orders.", PatternPrefixed, "User:u", OpWrite)
	wild := deny(ResourceTopic, WildcardName, PatternLiteral, "User:v", OpRead)
	grp := allow(ResourceGroup, "orders.x", PatternLiteral, "User:u", OpRead)
	mustCreate(t, a, tA, lit, pre, wild, grp)
	any := Filter{Resource: ResourceAny, Pattern: PatternAny, Op: OpAny, Perm: PermAny}
	with := func(f func(*Filter)) Filter { x := any; f(&x); return x }
	cases := []struct {
		name string
		f    Filter
		want int
	}{
		{"everything", any, 4},
		{"topics", with(func(f *Filter) { f.Resource = ResourceTopic }), 3},
		{"any pattern, exact name", with(func(f *Filter) { f.Name = "orders.x" }), 2},
		{"literal", with(func(f *Filter) { f.Pattern = PatternLiteral }), 3},
		{"prefixed", with(func(f *Filter) { f.Pattern = PatternPrefixed }), 1},
		{"match orders.x", with(func(f *Filter) { f.Resource, f.Pattern, f.Name = ResourceTopic, PatternMatch, "orders.x" }), 3},
		{"match payments", with(func(f *Filter) { f.Resource, f.Pattern, f.Name = ResourceTopic, PatternMatch, "payments" }), 1},
		{"prefixed orders.x (exact)", with(func(f *Filter) { f.Pattern, f.Name = PatternPrefixed, "orders.x" }), 0},
		{"principal", with(func(f *Filter) { f.Principal = "User:v" }), 1},
		{"host", with(func(f *Filter) { f.Host = "10.1.1.1" }), 0},
		{"op", with(func(f *Filter) { f.Op = OpWrite }), 2},
		{"deny", with(func(f *Filter) { f.Perm = PermDeny }), 1},
	}
	for _, c := range cases {
		if got := a.Describe(tA, c.f); len(got) != c.want {
			t.Errorf("%s: got %d %v, want %d", c.name, len(got), got, c.want)
		}
	}
	out, err := a.Delete(context.Background(), tA, []Filter{
		with(func(f *Filter) { f.Pattern = PatternPrefixed }),
		with(func(f *Filter) { f.Resource = ResourceTopic; f.Op = OpWrite }),
	})
	if err != nil || len(out) != 2 || len(out[0]) != 1 || len(out[1]) != 2 {
		t.Fatalf("delete: %v %v", out, err)
	}
	if got := a.Describe(tA, any); len(got) != 2 {
		t.Errorf("after delete: %v", got)
	}
	if _, err := a.Delete(context.Background(), tA, []Filter{{Resource: 0, Pattern: PatternAny, Op: OpAny, Perm: PermAny}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown filter: %v", err)
	}
}

func TestValidate(t *testing.T) {
	good := allow(ResourceTopic, "t", PatternLiteral, "User:u", OpRead)
	if err := Validate(good); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*Binding){
		"any resource":  func(b *Binding) { b.Resource = ResourceAny },
		"match pattern": func(b *Binding) { b.Pattern = PatternMatch },
		"any op":        func(b *Binding) { b.Op = OpAny },
		"any perm":      func(b *Binding) { b.Perm = PermAny },
		"empty name":    func(b *Binding) { b.Name = "" },
		"cluster name":  func(b *Binding) { b.Resource = ResourceCluster; b.Name = "c" },
		"principal":     func(b *Binding) { b.Principal = "alice" },
		"empty host":    func(b *Binding) { b.Host = "" },
	} {
		b := good
		f(&b)
		if err := Validate(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	a := newAuth(t)
	if err := a.Create(context.Background(), tA, []Binding{good, {}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("create with an invalid binding: %v", err)
	}
	if len(a.Describe(tA, Filter{Resource: ResourceAny, Pattern: PatternAny, Op: OpAny, Perm: PermAny})) != 0 {
		t.Error("a refused create stored something")
	}
}

func TestRefreshSeesOtherNodes(t *testing.T) {
	st := NewMemStore()
	a := New(Config{Enabled: true, Store: st})
	b := New(Config{Enabled: true, Store: st})
	mustCreate(t, a, tA, allow(ResourceTopic, "t", PatternLiteral, "User:u", OpRead))
	r := req("User:u", ResourceTopic, "t", OpRead)
	if b.Allowed(r) {
		t.Fatal("b saw the change before refreshing")
	}
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !b.Allowed(r) {
		t.Fatal("b did not see the change after refreshing")
	}
	b.Start()
	b.Close()
	a.Close() // never started
}

func TestPrincipals(t *testing.T) {
	if PrincipalUser("alice") != "User:alice" || PrincipalForJWT("sub-1") != "User:sub-1" {
		t.Error("user principals")
	}
	if PrincipalForJWT("") != Anonymous {
		t.Error("a token without a subject is not anonymous")
	}
	if PrincipalForAPIKey("c1", "k1") != "User:apikey:c1:k1" {
		t.Error("api key principal")
	}
	if op, ok := ParseOperation("describe-configs"); !ok || op != OpDescribeConfigs || op.String() != "DESCRIBE_CONFIGS" {
		t.Error("operation names")
	}
}

func BenchmarkAllowed(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprint("prefixed=", n), func(b *testing.B) {
			a := newAuth(b)
			var bs []Binding
			for i := range n {
				bs = append(bs, allow(ResourceTopic, fmt.Sprintf("team%d.", i), PatternPrefixed, fmt.Sprintf("User:u%d", i%50), OpWrite))
			}
			bs = append(bs, allow(ResourceTopic, "orders.", PatternPrefixed, "User:alice", OpWrite))
			mustCreate(b, a, tA, bs...)
			r := req("User:alice", ResourceTopic, "orders.eu.2026", OpWrite)
			if !a.Allowed(r) {
				b.Fatal("refused")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if !a.Allowed(r) {
					b.Fatal("refused")
				}
			}
		})
	}
}
