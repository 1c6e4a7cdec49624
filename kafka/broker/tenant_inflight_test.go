package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

func TestTenantInflightGate(t *testing.T) {
	g := &Broker{inflight: tenancy.NewInflight(100)}
	take := func(tenant wire.ID, n int) (func(), bool) { return g.takeProduceBytes(tenant, n) }
	a, b := wire.ID{1}, wire.ID{2}
	releaseA, ok := take(a, 250)
	if !ok {
		t.Fatal("a tenant holding nothing is refused a request over the limit")
	}
	if _, ok := take(a, 1); ok {
		t.Fatal("a tenant over its limit admitted more")
	}
	_, ok1 := take(b, 60)
	_, ok2 := take(b, 40)
	if _, ok3 := take(b, 1); !ok1 || !ok2 || ok3 {
		t.Fatal("another tenant's limit is not its own")
	}
	releaseA()
	if _, ok := take(a, 100); !ok {
		t.Fatal("released bytes not given back")
	}
	_, ok1 = take(wire.DefaultTenant, 1<<40)
	if _, ok2 := take(wire.DefaultTenant, 1<<40); !ok1 || !ok2 {
		t.Fatal("the default tenant is the whole node: not bounded here")
	}
}

// TestTenantInflightProduce: in tenancy mode a tenant whose producers hold
// their in-flight bytes is answered NOT_ENOUGH_REPLICAS (retriable, nothing
// written) with a throttle, while another tenant produces as before.
func TestTenantInflightProduce(t *testing.T) {
	const busy, calm = "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c", "0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b"
	n := startNode(t, func(c *Config) {
		c.Listener.Authenticate = StaticUsers(map[string]string{busy: "pw", calm: "pw"}, true)
		c.TenantMaxInflightBytes = 1 << 10
	})
	login := func(user string) *kgo.Client {
		return n.client(kgo.SASL(plain.Auth{User: user, Pass: "pw"}.AsMechanism()))
	}
	busyID, _ := tenancy.Parse(busy)
	releaseBusy, ok := n.broker.takeProduceBytes(busyID, 1<<10) // its other requests, still proposing
	if !ok {
		t.Fatal("acquire")
	}
	rec, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	produce := func(cl *kgo.Client) (int16, int32) {
		resp := rawProduceResponse(t, cl, "t", rec, -1)
		return resp.Topics[0].Partitions[0].ErrorCode, resp.ThrottleMillis
	}
	if code, throttle := produce(login(busy)); code != kerr.NotEnoughReplicas.Code || throttle <= 0 {
		t.Fatalf("a tenant over its in-flight bytes: error %d, throttle %d ms", code, throttle)
	}
	if _, ok := n.engine.KafkaTopic(busyID, "t"); ok {
		t.Fatal("a refused produce created its topic")
	}
	if code, _ := produce(login(calm)); code != 0 {
		t.Fatalf("another tenant: error %d", code)
	}
	releaseBusy()
	if code, _ := produce(login(busy)); code != 0 {
		t.Fatalf("once its bytes are released: error %d", code)
	}
}
