package api

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name limits of spec §1.1.
const (
	// nameBudget is shared by tenant + queue + the longer of partition and
	// consumer group.
	nameBudget       = 447
	tenantNameLen    = 36
	maxTxnIDBytes    = 65535
	defaultPartition = "Default"
)

// checkNames validates a queue name and the partition or group names used
// with it: each must be non-empty text without control characters, and
// together they must fit the spec's byte budget (413 name_too_long).
func checkNames(queue string, others ...string) error {
	if err := checkName("queue", queue); err != nil {
		return err
	}
	longest := 0
	for _, o := range others {
		if o == "" {
			continue
		}
		if err := checkName("name", o); err != nil {
			return err
		}
		longest = max(longest, len(o))
	}
	if tenantNameLen+len(queue)+longest > nameBudget {
		return nameTooLong("tenant, queue and partition/group names exceed 447 bytes together")
	}
	return nil
}

func checkName(what, s string) error {
	if err := checkNameSize(what, s); err != nil {
		return err
	}
	if strings.ContainsFunc(s, badNameRune) {
		return badRequest(what + " must be text without '/', control, bidi or invisible format characters")
	}
	return nil
}

// checkNameSize is checkName without the character rules: for deleting a
// queue named before the rules existed.
func checkNameSize(what, s string) error {
	if s == "" {
		return badRequest(what + " is required")
	}
	if len(s) > nameBudget {
		return nameTooLong(what + " is longer than 447 bytes")
	}
	if !utf8.ValidString(s) {
		return badRequest(what + " must be UTF-8 text")
	}
	return nil
}

// badNameRune is a character a name may not hold. Names travel in URL path
// segments, so '/' would make a queue no route can name (a/b could not be
// deleted). They are shown in listings, logs and dashboards, so neither
// control characters (C0, DEL, C1 such as NEL) nor line separators, nor
// format characters (bidi overrides and isolates, which display a name as
// another, zero-width spaces, BOM) are allowed, except the zero-width
// (non-)joiners that emoji sequences and some scripts need.
func badNameRune(r rune) bool {
	switch {
	case r == '/':
		return true
	case r == '\u200c' || r == '\u200d':
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}
