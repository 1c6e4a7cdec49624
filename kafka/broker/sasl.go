package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/crypto/secret"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// ErrBadCredentials refuses a SASL/PLAIN login.
var ErrBadCredentials = errors.New("kafka: bad SASL/PLAIN credentials")

// Identity is what a SASL/PLAIN login resolves to (kafka.Principal's
// Identity): the tenant the connection acts for and, when the password was a
// broker JWT, the token's principal whose roles limit what it may do (nil:
// no limits, a QUEEN_KAFKA_SASL_USERS login).
type Identity struct {
	Tenant    wire.ID
	Principal *authn.Principal
}

// loginTenant is the tenant a login acts for: in tenancy mode the SASL user
// name, which must be the tenant's UUID; otherwise the default tenant.
func loginTenant(user string, tenancyOn bool) (wire.ID, error) {
	if !tenancyOn {
		return wire.DefaultTenant, nil
	}
	if user == "" {
		return wire.ID{}, fmt.Errorf("%w: tenancy mode needs the tenant UUID as the user name", ErrBadCredentials)
	}
	id, err := tenancy.Parse(user)
	if err != nil {
		return wire.ID{}, fmt.Errorf("%w: %w", ErrBadCredentials, err)
	}
	return id, nil
}

// StaticUsers authenticates SASL/PLAIN logins against a fixed user→password
// table (QUEEN_KAFKA_SASL_USERS), comparing passwords in constant time.
func StaticUsers(users map[string]string, tenancyOn bool) kafka.PlainAuthenticator {
	matchers := make(map[string]secret.Matcher, len(users))
	for u, p := range users {
		matchers[u] = secret.NewMatcher(p)
	}
	return func(_ context.Context, user, password string) (kafka.Principal, error) {
		m, ok := matchers[user]
		if !ok || !m.Match(password) {
			return kafka.Principal{}, ErrBadCredentials
		}
		tenant, err := loginTenant(user, tenancyOn)
		if err != nil {
			return kafka.Principal{}, err
		}
		return kafka.Principal{User: user, Identity: Identity{Tenant: tenant}}, nil
	}
}

// BrokerJWTs authenticates SASL/PLAIN logins whose password is a broker JWT
// (spec decision 9, when JWT_ENABLED): the token's roles then limit the
// connection as they limit HTTP requests, and the session ends when the
// token would stop verifying unless the client logs in again (KIP-368).
func BrokerJWTs(v *authn.Verifier, tenancyOn bool) kafka.PlainAuthenticator {
	return func(ctx context.Context, user, password string) (kafka.Principal, error) {
		p, err := v.VerifyContext(ctx, password)
		if err != nil {
			return kafka.Principal{}, fmt.Errorf("%w: %w", ErrBadCredentials, err)
		}
		tenant, err := loginTenant(user, tenancyOn)
		if err != nil {
			return kafka.Principal{}, err
		}
		return kafka.Principal{User: user, Identity: Identity{Tenant: tenant, Principal: &p}, Expires: p.Expires}, nil
	}
}

// identityOf is a connection's login identity, if it has one.
func identityOf(c *kafka.Conn) (Identity, bool) {
	p, ok := c.Principal()
	if !ok {
		return Identity{}, false
	}
	id, ok := p.Identity.(Identity)
	return id, ok
}
