package tenancy

import (
	"errors"
	"fmt"

	"github.com/queen-mq/queen/wire"
)

// Header is the request header that names the tenant in tenancy header mode.
const Header = "x-queen-tenant"

// Errors a tenant resolution can end with; the front doors map them (400
// for a malformed id, 403 reserved_tenant).
var (
	ErrMalformedTenant = errors.New("tenancy: the tenant is not a UUID")
	ErrReservedTenant  = errors.New("tenancy: the tenant is reserved")
)

// SystemTenant is reserved for the node's own bookkeeping (the embedded
// proxy's state); no client request may address it.
var SystemTenant = wire.ID{}

// Parse resolves a tenant named by a client (the x-queen-tenant header, or
// a Kafka SASL identity). Empty means the default tenant.
func Parse(s string) (wire.ID, error) {
	if s == "" {
		return wire.DefaultTenant, nil
	}
	id, err := wire.ParseID(s)
	if err != nil {
		return wire.ID{}, fmt.Errorf("%w: %q", ErrMalformedTenant, s)
	}
	if id == SystemTenant {
		return wire.ID{}, ErrReservedTenant
	}
	return id, nil
}
