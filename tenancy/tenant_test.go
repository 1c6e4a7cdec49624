package tenancy

import (
	"errors"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func TestParseTenant(t *testing.T) {
	if id, err := Parse(""); err != nil || id != wire.DefaultTenant {
		t.Fatalf("absent: %v %v", id, err)
	}
	if id, err := Parse("7C3A1F9E-2B4D-4E8A-9F1C-0D2E3F4A5B6C"); err != nil || id.String() != "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c" {
		t.Fatalf("upper case: %v %v", id, err)
	}
	if _, err := Parse("acme"); !errors.Is(err, ErrMalformedTenant) {
		t.Fatalf("malformed: %v", err)
	}
	if _, err := Parse("00000000-0000-0000-0000-000000000000"); !errors.Is(err, ErrReservedTenant) {
		t.Fatalf("reserved: %v", err)
	}
}
