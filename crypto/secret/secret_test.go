package secret

import (
	"fmt"
	"strings"
	"testing"
)

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"token", "token", true},
		{"token", "tokex", false},
		{"token", "token2", false},
		{"token2", "token", false},
		{"", "", false},
		{"", "x", false},
		{"x", "", false},
		{"é", "é", true},
		{strings.Repeat("a", 1000), strings.Repeat("a", 1000), true},
	} {
		if got := Equal(tc.a, tc.b); got != tc.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := EqualBytes([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("EqualBytes(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := NewMatcher(tc.a).Match(tc.b); got != tc.want {
			t.Errorf("NewMatcher(%q).Match(%q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestZeroMatcherMatchesNothing(t *testing.T) {
	var m Matcher
	if m.Set() || m.Match("") || m.Match("x") {
		t.Fatal("zero Matcher matched")
	}
	if NewMatcher("").Set() {
		t.Fatal("empty secret gave a set Matcher")
	}
}

func TestMatcherDoesNotPrintDigest(t *testing.T) {
	m := NewMatcher("hunter2hunter2")
	for _, s := range []string{fmt.Sprint(m), fmt.Sprintf("%v %+v %#v", m, m, m)} {
		if strings.Contains(s, "hunter") || strings.ContainsAny(s, "0123456789") {
			t.Fatalf("Matcher printed %q", s)
		}
	}
}

// TestMask: a masked secret says only whether it is set. Its first
// characters and its length both narrow a guess (a 6-character token is
// worth brute-forcing), and a boot log travels to more places than the
// secret should.
func TestMask(t *testing.T) {
	if got := Mask(""); got != "<unset>" {
		t.Errorf("Mask(\"\") = %q, want <unset>", got)
	}
	for _, in := range []string{"a", "short12", "abcdefgh", strings.Repeat("f", 64), "éàabcdefg"} {
		got := Mask(in)
		if got != "<set>" {
			t.Errorf("Mask(%q) = %q, want <set>: no character, no length", in, got)
		}
	}
}

// A Matcher made of several secrets (a token being rotated) accepts each
// of them and nothing else; empty ones are ignored.
func TestMatcherAcceptsEveryConfiguredSecret(t *testing.T) {
	m := NewMatcher("new-token", "", "old-token")
	for presented, want := range map[string]bool{"new-token": true, "old-token": true, "": false, "other": false, "new-tokenx": false} {
		if got := m.Match(presented); got != want {
			t.Errorf("Match(%q) = %v, want %v", presented, got, want)
		}
	}
	if NewMatcher("", "").Set() {
		t.Fatal("a Matcher of empty secrets is set")
	}
}
