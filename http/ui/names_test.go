package ui

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVisibleShowsHiddenCharacters (issue 33 item 13): the dashboard showed
// a group id holding U+202E reversed. names.js's visible, which dom.js's
// element builder applies to every text it prints, writes such characters
// as ⟨U+XXXX⟩ and keeps other text, non-ASCII, tabs and line breaks
// included, as it is. Runs the
// module under node when the machine has it.
func TestVisibleShowsHiddenCharacters(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	mod, err := filepath.Abs("static/names.js")
	if err != nil {
		t.Fatal(err)
	}
	script := `import { visible } from ` + "'file://" + mod + "'" + `;
const cases = [
  ["pay\u202Etxt.exe", "pay⟨U+202E⟩txt.exe"],
  ["a\u0000b\nc\u0085", "a⟨U+0000⟩b\nc⟨U+0085⟩"],
  ["{\n\t\"k\": 1\r\n}", "{\n\t\"k\": 1\r\n}"],
  ["bell\u0007", "bell⟨U+0007⟩"],
  ["zero\u200Bwidth\uFEFF", "zero⟨U+200B⟩width⟨U+FEFF⟩"],
  ["café עברית 👩\u200D💻", "café עברית 👩\u200D💻"],
  [42, "42"],
];
for (const [input, want] of cases) {
  const got = visible(input);
  if (got !== want) { console.log(JSON.stringify({input, got, want})); process.exitCode = 1; }
}`
	cmd := exec.Command(node, "--input-type=module", "-e", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, strings.TrimSpace(string(out)))
	}
}
