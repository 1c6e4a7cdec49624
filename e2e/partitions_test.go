package e2e

import (
	"fmt"
	"net/http"
	"testing"
)

// An auto-ack pop honours partitions like a leased one: over a queue of
// one-message partitions, partitions=8 answers 8 messages from 8 distinct
// partitions, and the group's next pops go on with the rest.
func TestAutoAckPopHonoursPartitions(t *testing.T) {
	base, ctx := startOne(t)
	items := make([]pushItem, 20)
	for i := range items {
		items[i] = pushItem{Queue: "sparse", Partition: fmt.Sprintf("customer-%02d", i), Payload: map[string]int{"n": i}}
	}
	if _, code, err := push(ctx, base, items); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, err)
	}
	for _, flag := range []string{"autoAck", "commitOnDelivery"} {
		group := "g-" + flag
		seen := map[string]bool{}
		ans, code, err := pop(ctx, base, popPath("sparse", "batch=100", "partitions=8", flag+"=true",
			"subscriptionMode=all", "consumerGroup="+group))
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s pop: %d %v", flag, code, err)
		}
		for _, m := range ans.Messages {
			if m.LeaseID != "" {
				t.Fatalf("%s pop left a lease: %+v", flag, m)
			}
			seen[m.Partition] = true
		}
		if len(ans.Messages) != 8 || len(seen) != 8 {
			t.Fatalf("%s pop with partitions=8: %d messages from %d partitions, want 8 from 8", flag, len(ans.Messages), len(seen))
		}
		// The rest, once each: nothing delivered above comes again.
		ans, code, err = pop(ctx, base, popPath("sparse", "batch=100", "partitions=64", flag+"=true",
			"subscriptionMode=all", "consumerGroup="+group))
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s second pop: %d %v", flag, code, err)
		}
		for _, m := range ans.Messages {
			if seen[m.Partition] {
				t.Fatalf("%s: partition %s delivered twice", flag, m.Partition)
			}
			seen[m.Partition] = true
		}
		if len(seen) != 20 {
			t.Fatalf("%s: %d of 20 partitions delivered after two pops", flag, len(seen))
		}
	}
}
