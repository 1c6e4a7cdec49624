package api

import (
	"strings"
	"unicode/utf8"

	"github.com/queen-mq/queen/wire"
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

// badNameRune is a character a name may not hold: the rule is shared with
// the Kafka port's group ids (wire.BadNameRune says why).
func badNameRune(r rune) bool { return wire.BadNameRune(r) }
