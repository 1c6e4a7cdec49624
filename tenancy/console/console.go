// Package console owns the proxy's console pages (spec §6.10): plain HTML,
// CSS and JavaScript modules embedded in the binary, served by the proxy
// at /console. The pages reuse the dashboard's generic modules and styles
// (http/ui: style.css, api.js, dom.js, names.js, chart.js), served under the
// console's own /console/assets/ so the modules' relative imports resolve
// there; this package only serves files, the proxy owns the JSON API.
package console

import (
	"embed"
	"io/fs"
	"slices"
	"strings"

	"github.com/queen-mq/queen/http/ui"
)

//go:embed static
var files embed.FS

var assets = func() map[string]ui.Asset {
	root, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	out, err := ui.Load(root)
	if err != nil {
		panic(err)
	}
	return out
}()

// shared are the dashboard's files the console uses as they are; the
// dashboard's own pages are not the console's to serve.
var shared = []string{"style.css", "api.js", "dom.js", "names.js", "chart.js", "shell.js", "favicon.svg"}

// Page is the console's HTML document, served at /console.
func Page() ui.Asset { return assets["index.html"] }

// Lookup finds the asset at name, a path relative to /console/assets/:
// the console's own files, then the dashboard's shared ones.
func Lookup(name string) (ui.Asset, bool) {
	if name == "" || name == "index.html" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return ui.Asset{}, false
	}
	if a, ok := assets[name]; ok {
		return a, true
	}
	if slices.Contains(shared, name) {
		return ui.Lookup(name)
	}
	return ui.Asset{}, false
}
