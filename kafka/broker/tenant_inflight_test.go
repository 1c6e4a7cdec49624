package broker

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-mq/queen/kafka/records"
)

// TestTenantInflightProduceWaitsNotRefused: in tenancy mode a tenant's
// requests share TenantMaxInflightBytes on the node. Producers holding
// more than that together are not refused (NOT_ENOUGH_REPLICAS with a
// throttle, as before, halved a tenant's throughput through the proxy's
// Kafka door, issue 33): their connections wait for room, and every
// record is written once. Another tenant produces meanwhile.
func TestTenantInflightProduceWaitsNotRefused(t *testing.T) {
	const busy, calm = "7c3a1f9e-2b4d-4e8a-9f1c-0d2e3f4a5b6c", "0b9e2c41-5d3a-4f7e-8a6b-1c2d3e4f5a6b"
	n := startNode(t, func(c *Config) {
		c.Listener.Authenticate = StaticUsers(map[string]string{busy: "pw", calm: "pw"}, true)
		c.TenantMaxInflightBytes = 2 << 10
	})
	login := func(user string) *kgo.Client {
		return n.client(kgo.SASL(plain.Auth{User: user, Pass: "pw"}.AsMechanism()))
	}
	rec, err := records.AppendBatch(nil, records.NewBatchOptions(0), []records.Record{{Value: make([]byte, 900)}})
	if err != nil {
		t.Fatal(err)
	}
	const producers, each = 6, 5
	var wg sync.WaitGroup
	errs := make(chan string, producers*each)
	offsets := make(chan int64, producers*each)
	for range producers {
		cl := login(busy)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp := rawProduceResponse(t, cl, "t", rec, -1)
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 {
					errs <- fmt.Sprintf("busy tenant: a produce was refused: %v", kerr.ErrorForCode(p.ErrorCode))
					return
				}
				offsets <- p.BaseOffset
			}
		}()
	}
	if p := rawProduceResponse(t, login(calm), "t", rec, -1).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("another tenant: error %d", p.ErrorCode)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	close(offsets)
	seen := map[int64]bool{}
	for o := range offsets {
		if seen[o] || o < 0 || o >= producers*each {
			t.Fatalf("offset %d twice or out of range", o)
		}
		seen[o] = true
	}
	if len(seen) != producers*each {
		t.Fatalf("%d records written, want %d", len(seen), producers*each)
	}
}
