package api

import (
	"context"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func streamAckEncode(c *wire.StreamAckOp) []byte { return c.Encode(nil) }

// FuzzStreamCycleBody: whatever a cycle's body holds, the door refuses it
// with a 4xx or builds state operations and an acknowledgment that decode
// back to themselves, in the query's partition's rows only.
func FuzzStreamCycleBody(f *testing.F) {
	f.Add([]byte(`{"query_id":"q","partition_id":"42","consumer_group":"g",` +
		`"state_ops":[{"type":"upsert","key":"w:10","value":{"windowEnd":20}},{"type":"delete","key":"w:0"}],` +
		`"push_items":[{"queue":"sink","payload":1}],"ack":{"transactionId":"t","leaseId":"0190f6b0-0000-7000-8000-000000000000","status":"completed","count":3},"release_lease":false}`))
	f.Add([]byte(`{"query_id":"q","partition_id":7,"ack":{"transactionId":"t","status":"dlq","error":"boom"}}`))
	f.Add([]byte(`{"query_id":"q","partition_id":"a/b","state_ops":[{"type":"merge","key":""}]}`))
	s := fuzzServer(f, true)
	q := &streamQuery{ID: "0190f6b0-0000-7000-8000-000000000001", SourceQueue: "src", Gen: 3}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req streamCycleRequest
		tenant, err := s.tenantAndBody(requestWith(body), &req)
		if err != nil {
			clientError(t, err)
			return
		}
		if err := req.PartitionID.check(); err != nil {
			clientError(t, err)
			return
		}
		if len(req.StateOps) > 0 && len(req.StateOps) <= maxStreamStateOps {
			ops, err := s.cycleStateOps(context.Background(), tenant, q, string(req.PartitionID), req.StateOps)
			if err != nil {
				clientError(t, err)
				return
			}
			cmd := reencodes(t, "state ops", (&wire.KVCmd{Tenant: tenant, Ops: ops}).Encode(nil), wire.DecodeKVCmd, kvEncode)
			prefix := string(streamStatePrefix(q, string(req.PartitionID)))
			for _, o := range cmd.Ops {
				if o.NS != wire.StreamsNamespace || len(o.Key) > wire.MaxKVKeyBytes || string(o.Key[:len(prefix)]) != prefix {
					t.Fatalf("state op outside the partition's rows: %q %q", o.NS, o.Key)
				}
			}
		}
		if req.Ack != nil {
			if req.ConsumerGroup == "" {
				req.ConsumerGroup = wire.QueueModeGroup
			}
			op, err := cycleAck(tenant, &req)
			if err != nil {
				clientError(t, err)
				return
			}
			reencodes(t, "stream ack", op.Encode(nil), wire.DecodeStreamAckOp, streamAckEncode)
		}
	})
}
