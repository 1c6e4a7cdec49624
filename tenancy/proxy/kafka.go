package proxy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker"
	"github.com/queen-mq/queen/tenancy/acl"
)

// scopeLimits limits a Kafka connection logged in with an API key by the
// key's scopes, in the broker's access levels: produce may produce,
// consume may fetch and move group positions, read may fetch and
// describe, admin may do everything (create and delete topics too).
type scopeLimits []string

func (s scopeLimits) has(scopes ...string) bool {
	return slices.ContainsFunc(scopes, func(sc string) bool { return slices.Contains(s, sc) })
}

// Allows maps a broker access level to the scopes that pass it.
func (s scopeLimits) Allows(l authn.Level) bool {
	switch l {
	case authn.LevelPublic:
		return true
	case authn.LevelReadOnly:
		return s.has(ScopeConsume, ScopeRead, ScopeAdmin)
	case authn.LevelWriteOnly:
		return s.has(ScopeProduce, ScopeAdmin)
	case authn.LevelReadWrite:
		return s.has(ScopeConsume, ScopeAdmin)
	case authn.LevelAdmin:
		return s.has(ScopeAdmin)
	}
	return false
}

// KafkaKeySession is how long a Kafka login with an API key lasts: the
// client logs in again before then (KIP-368), which a revoked key cannot,
// so its open connections end within this.
const KafkaKeySession = 5 * time.Minute

// KafkaPlain authenticates SASL/PLAIN logins whose password is an API key
// (the user name is the key's cluster slug) into that cluster's broker
// tenant, limited by the key's scopes. Other passwords go to next (nil:
// refused).
func (p *Proxy) KafkaPlain(next kafka.PlainAuthenticator) kafka.PlainAuthenticator {
	return func(ctx context.Context, user, password string) (kafka.Principal, error) {
		if !strings.HasPrefix(password, KeyPrefix) {
			if next != nil {
				return next(ctx, user, password)
			}
			return kafka.Principal{}, broker.ErrBadCredentials
		}
		cred, err := p.keyCredential(ctx, password)
		if err != nil {
			return kafka.Principal{}, fmt.Errorf("%w: %w", broker.ErrBadCredentials, err)
		}
		if !strings.EqualFold(user, cred.cluster.Slug) {
			return kafka.Principal{}, fmt.Errorf("%w: key/cluster mismatch", broker.ErrBadCredentials)
		}
		view, err := p.view(ctx, cred.cluster)
		if err != nil {
			return kafka.Principal{}, fmt.Errorf("%w: %w", broker.ErrBadCredentials, err)
		}
		if view.rank >= statusRank(StatusSuspended) {
			return kafka.Principal{}, fmt.Errorf("%w: the cluster is suspended", broker.ErrBadCredentials)
		}
		tenant, err := p.tenantOf(cred.cluster)
		if err != nil {
			return kafka.Principal{}, fmt.Errorf("%w: %w", broker.ErrBadCredentials, err)
		}
		// The plan holds the login's requests as it holds the cluster's
		// HTTP ones (kafka_policy.go).
		// ACLs name the login by its key, as the HTTP door does.
		return kafka.Principal{User: user, Identity: broker.Identity{Tenant: tenant, Limited: scopeLimits(cred.scopes),
			Policy: p.newKafkaLogin(cred.cluster, tenant, view), ACLPrincipal: acl.PrincipalForAPIKey(cred.cluster.ID, cred.keyID)},
			Expires: time.Now().Add(KafkaKeySession)}, nil
	}
}
