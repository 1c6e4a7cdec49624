package ui

import (
	"testing"
	"testing/fstest"
)

// Every module import and every /assets/ reference in the page resolves
// to an embedded file: a renamed file fails here, not in a browser.
func TestEveryReferenceResolves(t *testing.T) {
	if len(assets) == 0 || Page().Body == nil {
		t.Fatal("nothing embedded")
	}
	if bad := Unresolved(assets, "/assets/", Lookup); len(bad) > 0 {
		t.Fatalf("not embedded: %q", bad)
	}
	// And the check finds what is missing.
	broken := map[string]Asset{"a.js": {Body: []byte(`import { x } from "./gone.js";` + "\n")},
		"index.html": {Body: []byte(`<script src="/assets/nope.js"></script><a href="/elsewhere">`)}}
	if bad := Unresolved(broken, "/assets/", Lookup); len(bad) != 2 {
		t.Fatalf("broken references found: %q", bad)
	}
}

func TestLoadRefusesUnknownTypes(t *testing.T) {
	if _, err := Load(fstest.MapFS{"x.bin": {Data: []byte{1}}}); err == nil {
		t.Fatal("a file of no known type loaded")
	}
	got, err := Load(fstest.MapFS{"a/b.css": {Data: []byte("p{}")}})
	if err != nil || got["a/b.css"].ContentType != "text/css; charset=utf-8" {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestLookupRefusesPathsOutsideTheAssets(t *testing.T) {
	for _, name := range []string{"", "/app.js", "../ui.go", "pages/../../ui.go", "missing.js"} {
		if _, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) found something", name)
		}
	}
	if a, ok := Lookup("app.js"); !ok || a.ContentType != "text/javascript; charset=utf-8" || a.ETag == "" {
		t.Fatalf("app.js: %v %+v", ok, a.ContentType)
	}
}
