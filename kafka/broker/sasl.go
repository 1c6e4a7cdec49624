package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/crypto/secret"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// ErrBadCredentials refuses a SASL login.
var ErrBadCredentials = errors.New("kafka: bad SASL credentials")

// Identity is what a SASL login resolves to (kafka.Principal's Identity):
// the tenant the connection acts for and, when it logged in with a broker
// JWT (a PLAIN password or an OAUTHBEARER token), the token's principal
// whose roles limit what it may do (nil: no limits, a
// QUEEN_KAFKA_SASL_USERS login over PLAIN or SCRAM).
type Identity struct {
	Tenant    wire.ID
	Principal *authn.Principal
	// Limited, when set, limits the connection instead of Principal: the
	// embedded proxy's API keys, whose scopes are not broker JWT roles.
	Limited Limits
	// Policy, when set, holds the login to its cluster's plan (the
	// embedded proxy's API keys; proxy_hooks.go).
	Policy Policy
	// ACLPrincipal, when set, is the principal ACLs name the login by
	// (an API key's, acl.PrincipalForAPIKey); else it is derived from
	// Principal or the user name (acl_enforce.go).
	ACLPrincipal string
}

// Limits is what a login may do, by HTTP access level (authn.Principal
// is one).
type Limits interface {
	Allows(authn.Level) bool
}

// limits is what limits the identity's connection; nil: nothing.
func (id Identity) limits() Limits {
	if id.Limited != nil {
		return id.Limited
	}
	if id.Principal != nil {
		return id.Principal
	}
	return nil
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
		// Not err itself: it quotes the whole user name, which the client
		// chose and may make as long as a frame.
		if errors.Is(err, tenancy.ErrReservedTenant) {
			return wire.ID{}, fmt.Errorf("%w: the tenant is reserved", ErrBadCredentials)
		}
		return wire.ID{}, fmt.Errorf("%w: the user name is not a tenant UUID", ErrBadCredentials)
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
		return staticUser(user, tenancyOn)
	}
}

// staticUser is the principal a QUEEN_KAFKA_SASL_USERS user logs in as,
// over PLAIN or SCRAM.
func staticUser(user string, tenancyOn bool) (kafka.Principal, error) {
	tenant, err := loginTenant(user, tenancyOn)
	if err != nil {
		return kafka.Principal{}, err
	}
	return kafka.Principal{User: user, Identity: Identity{Tenant: tenant}}, nil
}

// BrokerJWTs authenticates SASL/PLAIN logins whose password is a broker JWT
// (spec decision 9, when JWT_ENABLED): the token's roles then limit the
// connection as they limit HTTP requests, and the session ends when the
// token would stop verifying unless the client logs in again (KIP-368).
//
// In tenancy mode the token must name its tenant (JWT_TENANT_CLAIM) and the
// user name must be that tenant: the user name alone is the client's
// choice, and tenant ids are not secrets, so without the claim any valid
// token would open every tenant's topics.
func BrokerJWTs(v *authn.Verifier, tenancyOn bool) kafka.PlainAuthenticator {
	bearer := BearerJWTs(v, tenancyOn)
	return func(ctx context.Context, user, password string) (kafka.Principal, error) {
		p, err := bearer(ctx, password)
		if err != nil {
			return kafka.Principal{}, err
		}
		tenant, err := loginTenant(user, tenancyOn)
		if err != nil {
			return kafka.Principal{}, err
		}
		if p.Identity.(Identity).Tenant != tenant { // both the default tenant without tenancy
			return kafka.Principal{}, fmt.Errorf("%w: the token is for another tenant than the user name", ErrBadCredentials)
		}
		p.User = user
		return p, nil
	}
}

// tokenTenant is the tenant a broker JWT's tenant claim names, which it
// must carry in tenancy mode.
func tokenTenant(p *authn.Principal) (wire.ID, error) {
	if p.Tenant == "" {
		return wire.ID{}, fmt.Errorf("%w: the token names no tenant", ErrBadCredentials)
	}
	id, err := tenancy.Parse(p.Tenant)
	if err != nil {
		return wire.ID{}, fmt.Errorf("%w: the token's tenant claim: %w", ErrBadCredentials, err)
	}
	return id, nil
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

// ScramIterations is the PBKDF2 iteration count of the SCRAM credentials
// derived at boot: Kafka's default and minimum.
const ScramIterations = 4096

// ScramUsers derives SCRAM-SHA-256 and SCRAM-SHA-512 credentials for the
// static users (QUEEN_KAFKA_SASL_USERS), each with its own random salt,
// once at boot: what SCRAM keeps is salted and hashed, never a password.
// In tenancy mode a user name is the tenant's UUID, as for PLAIN.
func ScramUsers(users map[string]string, tenancyOn bool) (kafka.ScramCredentials, error) {
	stored := map[string]map[string]kafka.ScramCredential{}
	for _, mech := range []string{kafka.MechanismScramSHA256, kafka.MechanismScramSHA512} {
		stored[mech] = map[string]kafka.ScramCredential{}
		for user, password := range users {
			salt := make([]byte, 24)
			if _, err := rand.Read(salt); err != nil {
				return nil, err
			}
			cred, err := kafka.NewScramCredential(mech, password, salt, ScramIterations)
			if err != nil {
				return nil, err
			}
			stored[mech][user] = cred
		}
	}
	return func(_ context.Context, mechanism, user string) (kafka.ScramCredential, kafka.Principal, error) {
		creds, ok := stored[mechanism][user]
		if !ok {
			return kafka.ScramCredential{}, kafka.Principal{}, ErrBadCredentials
		}
		p, err := staticUser(user, tenancyOn)
		if err != nil {
			return kafka.ScramCredential{}, kafka.Principal{}, err
		}
		return creds, p, nil
	}, nil
}

// BearerJWTs authenticates OAUTHBEARER logins whose token is a broker JWT:
// as with BrokerJWTs its roles limit the connection and the session ends
// with the token. The principal is the token's subject. In tenancy mode
// the tenant is the token's tenant claim, which it must carry: there is no
// user name beside it.
func BearerJWTs(v *authn.Verifier, tenancyOn bool) kafka.BearerAuthenticator {
	return func(ctx context.Context, token string) (kafka.Principal, error) {
		p, err := v.VerifyContext(ctx, token)
		if err != nil {
			return kafka.Principal{}, fmt.Errorf("%w: %w", ErrBadCredentials, err)
		}
		tenant := wire.DefaultTenant
		if tenancyOn {
			if tenant, err = tokenTenant(&p); err != nil {
				return kafka.Principal{}, err
			}
		}
		return kafka.Principal{User: p.Subject, Identity: Identity{Tenant: tenant, Principal: &p}, Expires: p.Expires}, nil
	}
}
