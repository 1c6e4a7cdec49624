package http

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/e2e/e2etest"
)

// TestProxyPlanAsClientQuotas: the walkthrough cluster (acme, free plan,
// enforced) logged in over Kafka with its API key: DescribeClientQuotas
// lists the plan's rates as the user entity acme's quotas, altering one
// answers INVALID_REQUEST and changes nothing, and past the request rate
// the answers carry throttle_time_ms, no error.
func TestProxyPlanAsClientQuotas(t *testing.T) {
	key, _ := newAPIKey(t)
	c, _ := proxyNode(t, key, "cp-token-plan-quotas", map[string]string{"QUEEN_PROXY_ENFORCE": "true",
		"QUEEN_PROXY_BOOTSTRAP_PLAN": "free", "QUEEN_KAFKA_SASL": "plain"})
	ctx := e2etest.Deadline(t, 2*time.Minute)
	hook := &throttleHook{}
	cl := e2etest.KgoClient(t, c, kgo.SASL(plain.Auth{User: "acme", Pass: key}.AsMechanism()), kgo.WithHooks(hook))
	adm := kadm.NewClient(cl)
	want := "{user=acme}:messages_burst=100.000000,messages_per_sec=20.000000,requests_burst=25.000000,requests_per_sec=5.000000"
	acme := "acme"
	describe := func() string {
		t.Helper()
		qs, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{
			{Type: "user", MatchName: &acme, MatchType: kmsg.QuotasMatchTypeExact}})
		if err != nil || len(qs) != 1 {
			t.Fatalf("describe: %v %+v", err, qs)
		}
		s := qs[0].Entity.String() + ":"
		for i, v := range qs[0].Values {
			if i > 0 {
				s += ","
			}
			s += v.String()
		}
		return s
	}
	if got := describe(); got != want {
		t.Fatalf("the plan as client quotas:\n got %s\nwant %s", got, want)
	}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &acme}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "requests_per_sec", Value: 1000}}}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidRequest) {
		t.Fatalf("altering the plan's rate: %v %+v, want INVALID_REQUEST", err, res)
	}
	t.Logf("refused: %s", res[0].ErrMessage)
	if got := describe(); got != want {
		t.Fatalf("after the refused alteration: %s", got)
	}
	// 5 requests/s, a burst of 25: 40 metadata requests are throttled,
	// none fails.
	for i := range 40 {
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
			t.Fatal(fmt.Errorf("metadata %d: %w", i, err))
		}
	}
	if hook.n.Load() == 0 {
		t.Fatal("40 requests on a plan of 5 requests/s (burst 25): never throttled")
	}
}
