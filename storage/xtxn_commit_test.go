package storage

import (
	"testing"

	"github.com/queen-mq/queen/wire"
)

// A participant's part, once prepared, is applied when the decision is
// commit, whatever ran in its group between the prepare and the commit
// (review finding 2 of issue 32: the commit re-ran the checks, failed, and
// the part was only logged while the coordinator's part stood). Each case
// prepares a part that acknowledges a leased input and pushes an output,
// runs one command that used to break it, and commits.
func TestACommittedPartIsAppliedWhateverCameBetween(t *testing.T) {
	cases := []struct {
		name    string
		between func(t *testing.T, h *harness)
		// outputs is how many messages the output partition holds after
		// the commit.
		outputs uint64
	}{
		{"the idle output partition's cleanup", func(t *testing.T, h *harness) {
			h.now += 2 * testCleanupMs
			h.cleanTick(testCleanupMs)
		}, 1},
		{"a restart, then the idle output partition's cleanup", func(t *testing.T, h *harness) {
			h.restart(true) // the reservation is read back with the prepared part
			h.now += 2 * testCleanupMs
			h.cleanTick(testCleanupMs)
		}, 1},
		{"a stepped seek of the input's group", func(t *testing.T, h *harness) {
			seek := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "in", Group: wire.QueueModeGroup, ToEnd: true}
			r := h.countCmd(wire.KindSeek, seek.EncodeStep(wire.Steps{Limit: 8}))
			if r.Code != wire.CodeOK || r.N != 0 || !r.More {
				t.Fatalf("a seek step over the pinned cursor: %+v, want it to wait (no partition, more)", r)
			}
			one := seek
			one.Partition = "p"
			if r := h.countCmd(wire.KindSeek, one.Encode(nil)); r.Code != wire.CodeConflict {
				t.Fatalf("a seek of the pinned partition: %+v, want a conflict", r)
			}
		}, 1},
		{"a stepped delete of the input's group", func(t *testing.T, h *harness) {
			del := wire.DeleteGroupCmd{Tenant: wire.DefaultTenant, Queue: "in", Group: wire.QueueModeGroup}
			if r := h.countCmd(wire.KindDeleteGroup, del.EncodeStep(wire.Steps{Limit: 8})); r.Code != wire.CodeOK || r.N != 0 || !r.More {
				t.Fatalf("a delete step over the pinned cursor: %+v, want it to wait", r)
			}
		}, 1},
		{"a push that took the output's transaction id", func(t *testing.T, h *harness) {
			if r := h.txn(wire.TxnCmd{ID: wire.ID{0: 1, 15: 77}, Ops: []wire.TxnOp{h.pushOp("out", "p", "out-1")}}); r.Code != wire.CodeOK {
				t.Fatalf("the other push: %+v", r)
			}
		}, 1},
		{"encryption turned on for the output", func(t *testing.T, h *harness) {
			cfg := wire.DefaultQueueConfig()
			cfg.EncryptionEnabled = true
			h.configure("out", wire.OptEncryptionEnabled, cfg)
		}, 1},
		{"the output queue deleted and created again", func(t *testing.T, h *harness) {
			del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "out"}
			if r, err := wire.DecodeDeleteQueueResult(h.apply(wire.KindDeleteQueue, del.Encode(nil))); err != nil || r.Code != wire.CodeOK {
				t.Fatalf("delete: %v %+v", err, r)
			}
			h.alloc("out", "p")
		}, 0}, // the prepared push went with the queue it was prepared for
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.push("in", "p", "a")
			cl := h.pop("in", wire.QueueModeGroup, 1, 60_000).Claims[0]
			_, txns := h.payloads(cl)
			out := h.pushOp("out", "p", "out-1")
			var push wire.PushCmd
			if pc, err := wire.DecodePushCmd(out.Body); err == nil {
				push = pc
			}
			push.Flags |= wire.PushKeyHeld // sent by a node holding the key, the queue then unencrypted
			push.Inc = h.s.queue(wire.DefaultTenant, "out").inc
			out.Body = push.Encode(nil)
			xid := wire.ID{0: 1, 15: 9}
			part := wire.TxnCmd{RequiredLeases: []wire.ID{cl.LeaseID}, Ops: []wire.TxnOp{ackOp(wire.QueueModeGroup, cl, txns[0], false), out}}
			if r := h.prepare(xid, 1, part); r.Code != wire.CodeOK {
				t.Fatalf("prepare: %+v", r)
			}
			tc.between(t, h)
			r := h.resolve(xid, true)
			res, err := wire.DecodeTxnResult(r.Sub)
			if r.Code != wire.CodeOK || err != nil || res.Code != wire.CodeOK {
				t.Fatalf("the commit was not applied: %+v %+v %v", r, res, err)
			}
			if a, _ := wire.DecodeAckResult(res.Ops[0]); a.Items[0].Code != wire.CodeOK {
				t.Fatalf("the committed ack: %+v", a)
			}
			p, ok := h.s.PartitionByName(wire.DefaultTenant, "out", "p")
			if got := p.HighWatermark(); !ok || got != tc.outputs {
				t.Fatalf("the output partition holds %d messages (found %v), want %d", got, ok, tc.outputs)
			}
			if again := h.pop("in", wire.QueueModeGroup, 5, 1000); len(again.Claims) != 0 {
				t.Fatalf("the acknowledged input was handed out again: %+v", again)
			}
		})
	}
}
