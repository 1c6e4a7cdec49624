// visible shows text as the dashboard prints it: characters that would
// hide or disguise a name (controls, bidi overrides and isolates,
// zero-width and other invisible format characters, line separators) are
// written as ⟨U+XXXX⟩ instead of acting on the page. A consumer group named
// "pay\u202Etxt.exe" was shown as "payexe.txt" (issue 33). The zero-width
// joiners of emoji sequences are kept, and so are tab, line feed and
// carriage return: they disguise nothing, and the message browser prints
// payloads (pretty JSON) through the same builder. No DOM here, so a test
// can run it.
const hidden = /[^\t\n\r\P{Cc}]|[\p{Cf}\p{Zl}\p{Zp}]/gu;
export function visible(text) {
  return String(text).replace(hidden, (ch) => (ch === "\u200c" || ch === "\u200d")
    ? ch
    : `⟨U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
}
