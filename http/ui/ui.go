// Package ui owns the web dashboard: plain HTML, CSS and JavaScript modules
// embedded in the binary, so `go run ./cmd/queen` serves the page with
// nothing else to install or build. The pages read and act through the
// broker's own HTTP API; this package only serves the files. Its styles
// and modules (api.js, dom.js, chart.js, shell.js, style.css) are generic
// so the proxy's console (tenancy/console) reuses them.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

//go:embed static
var files embed.FS

// Asset is one embedded file, ready to answer.
type Asset struct {
	Body        []byte
	ContentType string
	ETag        string // strong validator: a hash of the body
}

// contentTypes are the types of the files the dashboard ships; a fixed
// table rather than the system's mime database, whose answers vary by
// host (a module script must be served as JavaScript).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// assets maps a URL path under /assets/ (and "" for the page itself) to
// its file, built once: the files never change in a running binary.
var assets = func() map[string]Asset {
	root, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	out, err := Load(root)
	if err != nil {
		panic(err)
	}
	return out
}()

// Load reads every file of root into assets by their slash paths, with
// content types and validators: the dashboard's files and the proxy's
// console's are served the same way.
func Load(root fs.FS) (map[string]Asset, error) {
	out := map[string]Asset{}
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("ui: no content type for %s", p)
		}
		out[p] = Asset{Body: b, ContentType: ct, ETag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return out, err
}

// Page is the dashboard's HTML document, served at "/".
func Page() Asset { return assets["index.html"] }

// Lookup finds the asset at name, a path relative to /assets/. Names
// with "..", a leading slash or unknown to the embed find nothing.
func Lookup(name string) (Asset, bool) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return Asset{}, false
	}
	a, ok := assets[name]
	return a, ok
}

var (
	moduleImport = regexp.MustCompile(`(?m)^import [^"]*"([^"]+)";`)
	pageRef      = regexp.MustCompile(`"(/[^"]+)"`)
)

// Unresolved lists the references among files that lookup cannot find:
// each JavaScript module's imports (relative to the module) and each HTML
// page's links under prefix ("/assets/" for the dashboard). The
// dashboard's and the console's tests use it, so a renamed file fails a
// test rather than a browser.
func Unresolved(files map[string]Asset, prefix string, lookup func(string) (Asset, bool)) []string {
	var out []string
	for name, a := range files {
		switch {
		case strings.HasSuffix(name, ".js"):
			for _, m := range moduleImport.FindAllStringSubmatch(string(a.Body), -1) {
				if _, ok := lookup(path.Join(path.Dir(name), m[1])); !ok {
					out = append(out, name+" imports "+m[1])
				}
			}
		case strings.HasSuffix(name, ".html"):
			for _, m := range pageRef.FindAllStringSubmatch(string(a.Body), -1) {
				ref, ok := strings.CutPrefix(m[1], prefix)
				if !ok {
					continue
				}
				if _, ok := lookup(ref); !ok {
					out = append(out, name+" refers to "+m[1])
				}
			}
		}
	}
	return out
}
