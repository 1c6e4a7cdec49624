package ui

import (
	"path"
	"regexp"
	"strings"
	"testing"
)

// Every module import and every /assets/ reference in the page resolves
// to an embedded file: a renamed file fails here, not in a browser.
func TestEveryReferenceResolves(t *testing.T) {
	imports := regexp.MustCompile(`(?m)^import [^"]*"([^"]+)";`)
	refs := regexp.MustCompile(`"/assets/([^"]+)"`)
	if len(assets) == 0 || Page().Body == nil {
		t.Fatal("nothing embedded")
	}
	for name, a := range assets {
		if strings.HasSuffix(name, ".js") {
			for _, m := range imports.FindAllStringSubmatch(string(a.Body), -1) {
				target := path.Join(path.Dir(name), m[1])
				if _, ok := Lookup(target); !ok {
					t.Errorf("%s imports %s: not embedded", name, m[1])
				}
			}
		}
		if strings.HasSuffix(name, ".html") {
			for _, m := range refs.FindAllStringSubmatch(string(a.Body), -1) {
				if _, ok := Lookup(m[1]); !ok {
					t.Errorf("%s refers to /assets/%s: not embedded", name, m[1])
				}
			}
		}
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
