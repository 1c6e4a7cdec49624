package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker"
)

func TestKafkaPlainWithAnAPIKey(t *testing.T) {
	p, _ := testProxy(t, Config{})
	ctx := context.Background()
	key, _ := NewKey("live")
	tn, _, _ := p.store.ensureTenant(ctx, "acme", "")
	c, _, _ := p.store.ensureCluster(ctx, tn, "acme", "dev", nil)
	if _, _, err := p.store.ensureKey(ctx, c.ID, "k", HashKey(key), []string{ScopeProduce}); err != nil {
		t.Fatal(err)
	}
	fallback := 0
	auth := p.KafkaPlain(func(context.Context, string, string) (kafka.Principal, error) {
		fallback++
		return kafka.Principal{}, broker.ErrBadCredentials
	})
	pr, err := auth(ctx, "acme", key)
	if err != nil {
		t.Fatal(err)
	}
	id := pr.Identity.(broker.Identity)
	if id.Tenant.String() != c.BrokerTenant || time.Until(pr.Expires) > KafkaKeySession || time.Until(pr.Expires) < KafkaKeySession-time.Minute {
		t.Fatalf("principal %+v", pr)
	}
	lim := id.Limited
	if !lim.Allows(authn.LevelWriteOnly) || lim.Allows(authn.LevelReadOnly) || lim.Allows(authn.LevelReadWrite) || lim.Allows(authn.LevelAdmin) {
		t.Fatal("a produce-only key's levels are wrong")
	}
	if _, err := auth(ctx, "other", key); !errors.Is(err, broker.ErrBadCredentials) {
		t.Fatalf("the key as another cluster: %v", err)
	}
	if _, err := auth(ctx, "acme", "not-a-key"); !errors.Is(err, broker.ErrBadCredentials) || fallback != 1 {
		t.Fatalf("a password that is no key goes to the fallback: %v (%d)", err, fallback)
	}
	if !(scopeLimits{ScopeConsume}).Allows(authn.LevelReadWrite) || (scopeLimits{ScopeConsume}).Allows(authn.LevelWriteOnly) ||
		!(scopeLimits{ScopeAdmin}).Allows(authn.LevelAdmin) || (scopeLimits{ScopeRead}).Allows(authn.LevelReadWrite) {
		t.Fatal("scope levels are wrong")
	}
}
