package wire

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// BadNameRune is a character a queue, partition or consumer group name may
// not hold, over HTTP and Kafka alike. Names travel in URL path segments,
// so '/' would make a queue no route can name (a/b could not be deleted).
// They are shown in listings, logs and dashboards, so neither control
// characters (C0, DEL, C1 such as NEL) nor line separators, nor format
// characters (bidi overrides and isolates, which display a name as
// another, zero-width spaces, BOM) are allowed, except the zero-width
// (non-)joiners that emoji sequences and some scripts need.
func BadNameRune(r rune) bool { return r == '/' || HiddenRune(r) }

// HiddenRune is a character that hides or disguises a name when shown:
// BadNameRune without '/', which Kafka group ids may hold (they travel in
// no URL path).
func HiddenRune(r rune) bool {
	if r == '\u200c' || r == '\u200d' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// CleanName reports whether s is UTF-8 text without a HiddenRune.
func CleanName(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, HiddenRune)
}
