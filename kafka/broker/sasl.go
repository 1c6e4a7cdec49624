package broker

import (
	"context"
	"errors"

	"github.com/queen-mq/queen/crypto/secret"
	"github.com/queen-mq/queen/kafka"
)

// ErrBadCredentials refuses a SASL/PLAIN login.
var ErrBadCredentials = errors.New("kafka: bad SASL/PLAIN credentials")

// StaticUsers authenticates SASL/PLAIN logins against a fixed user→password
// table (QUEEN_KAFKA_SASL_USERS), comparing passwords in constant time.
func StaticUsers(users map[string]string) kafka.PlainAuthenticator {
	matchers := make(map[string]secret.Matcher, len(users))
	for u, p := range users {
		matchers[u] = secret.NewMatcher(p)
	}
	return func(_ context.Context, user, password string) (kafka.Principal, error) {
		m, ok := matchers[user]
		if !ok || !m.Match(password) {
			return kafka.Principal{}, ErrBadCredentials
		}
		return kafka.Principal{User: user}, nil
	}
}
