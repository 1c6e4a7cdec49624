package proxy

import (
	"strings"
	"testing"
)

func TestKeyFormatAndHash(t *testing.T) {
	k, err := NewKey("live")
	if err != nil {
		t.Fatal(err)
	}
	if !ValidKey(k) || !strings.HasPrefix(k, "qk_live_") || len(k) != len("qk_live_")+43 {
		t.Fatalf("minted key %q does not have the format", k)
	}
	for _, bad := range []string{"", "qk_live_short", "qk__" + strings.Repeat("a", 43), "qk_LIVE_" + strings.Repeat("a", 43),
		"xk_live_" + strings.Repeat("a", 43), "qk_live_" + strings.Repeat("a", 42) + "+", "qk_live_" + strings.Repeat("a", 44)} {
		if ValidKey(bad) {
			t.Errorf("%q passes as a key", bad)
		}
	}
	// The seed's recipe: printf %s "$KEY" | sha256sum.
	if got := HashKey("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("hash %q is not the hex sha256", got)
	}
	if !validHash(HashKey(k)) || validHash(strings.ToUpper(HashKey(k))) || validHash("abc") {
		t.Fatal("validHash accepts the wrong things")
	}
}

func TestScopesNormalize(t *testing.T) {
	got, err := normalizeScopes([]string{"read", "produce", "read"})
	if err != nil || strings.Join(got, ",") != "produce,read" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := normalizeScopes(nil); err == nil {
		t.Fatal("an empty scope set passes")
	}
	if _, err := normalizeScopes([]string{"write"}); err == nil {
		t.Fatal("an unknown scope passes")
	}
}

func TestHostLabel(t *testing.T) {
	p := &Proxy{cfg: Config{SharedHosts: []string{"api.queen.example.com"}}}
	cases := []struct {
		host, label string
		shared      bool
	}{
		{"acme.queen.example.com", "acme", false},
		{"ACME.queen.example.com.:443", "acme", false},
		{"localhost:6711", "localhost", false},
		{"api.queen.example.com:6711", "", true},
		{"api.queen.example.com.", "", true},
	}
	for _, c := range cases {
		label, shared := p.hostLabel(c.host)
		if label != c.label || shared != c.shared {
			t.Errorf("%s: %q %v, want %q %v", c.host, label, shared, c.label, c.shared)
		}
	}
}
