package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Fuzz targets for the HTTP door's request decoding: each takes a body (or
// a query string) as a client could send it, runs the handler's own
// decoding and validation, and stops where the handler would propose. The
// properties:
//   - nothing panics;
//   - a refusal is a client error (an *apiError with a 4xx status), never
//     an internal one;
//   - what is accepted becomes commands that the state machine decodes and
//     that encode back to the same bytes, carrying what the client sent.
//
// Seeds live in testdata/fuzz/<target>/. `task fuzz` runs every fuzz
// target of the module for a while each.

// fuzzServer is a Server whose engine is a single in-process node when the
// target needs one (encryption lookups, the clock), else none; nothing is
// served.
func fuzzServer(f *testing.F, withEngine bool) *Server {
	cfg := Config{MaxBodyBytes: 1 << 20}
	if !withEngine {
		return New(cfg, nil, raftgroupstest.Quiet)
	}
	_, engine := raftgroupstest.Start(f)
	return New(cfg, engine, raftgroupstest.Quiet)
}

// requestWith is a request context carrying body.
func requestWith(body []byte) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	ctx.Request.SetBody(body)
	return &ctx
}

// clientError fails unless err is a refusal of the request itself.
func clientError(t *testing.T, err error) {
	t.Helper()
	var ae *apiError
	if !errors.As(err, &ae) || ae.status < 400 || ae.status > 499 {
		t.Fatalf("bad input answered as %T %v, not a 4xx", err, err)
	}
}

// reencodes decodes enc with decode, encodes the result again and
// requires the same bytes.
func reencodes[C any](t *testing.T, what string, enc []byte, decode func([]byte) (C, error), encode func(*C) []byte) C {
	t.Helper()
	c, err := decode(enc)
	if err != nil {
		t.Fatalf("%s the door built does not decode: %v", what, err)
	}
	if again := encode(&c); !bytes.Equal(again, enc) {
		t.Fatalf("%s does not encode back to its bytes:\n%x\n%x", what, enc, again)
	}
	return c
}

func pushEncode(c *wire.PushCmd) []byte        { return c.Encode(nil) }
func ackEncode(c *wire.AckCmd) []byte          { return c.Encode(nil) }
func kvEncode(c *wire.KVCmd) []byte            { return c.Encode(nil) }
func timersEncode(c *wire.TimersCmd) []byte    { return c.Encode(nil) }
func txnEncode(c *wire.TxnCmd) []byte          { return c.Encode(nil) }
func positionEncode(c *wire.PositionOp) []byte { return c.Encode(nil) }
func configureEncode(c *wire.ConfigureCmd) []byte {
	return c.Encode(nil)
}

// checkPushCommands requires every accepted item to sit in the command of
// its queue and partition, as a record holding its payload, transaction id
// and message id.
func checkPushCommands(t *testing.T, items []pushItem, cmds []wire.PushCmd, placed []itemPlace, ids []wire.ID) {
	t.Helper()
	records := make([][]wire.Record, len(cmds))
	for i := range cmds {
		c := reencodes(t, "push command", cmds[i].Encode(nil), wire.DecodePushCmd, pushEncode)
		it := wire.NewRecordIter(c.Records)
		for body, _, ok := it.Next(); ok; body, _, ok = it.Next() {
			rec, err := wire.ParseRecord(body)
			if err != nil {
				t.Fatalf("record the door built: %v", err)
			}
			records[i] = append(records[i], rec)
		}
		if len(records[i]) != c.Count {
			t.Fatalf("push command says %d records, holds %d", c.Count, len(records[i]))
		}
	}
	for i, it := range items {
		p := placed[i]
		c := cmds[p.cmd]
		if c.Queue != it.Queue || c.Partition != it.Partition {
			t.Fatalf("item %d for %s/%s placed in %s/%s", i, it.Queue, it.Partition, c.Queue, c.Partition)
		}
		rec := records[p.cmd][p.rec]
		want := bytes.TrimSpace(it.Payload)
		if len(want) == 0 {
			want = []byte("null")
		}
		if !bytes.Equal(rec.Payload, want) || rec.MsgID != ids[i] || string(rec.TxnID) != it.TransactionID {
			t.Fatalf("item %d stored as payload %q txn %q id %v; sent %q txn %q id %v",
				i, rec.Payload, rec.TxnID, rec.MsgID, want, it.TransactionID, ids[i])
		}
	}
}

func FuzzPushBody(f *testing.F) {
	f.Add([]byte(`{"items":[{"queue":"q","partition":"p","payload":{"a":1},"transactionId":"t1"}]}`))
	f.Add([]byte(`{"items":[{"queue":"q","payload":"x"},{"queue":"q","payload":null},{"queue":"r","partition":"p","payload":[1,2]}]}`))
	f.Add([]byte(`{"items":[{"queue":"","payload":1}]}`))
	s := fuzzServer(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req pushRequest
		tenant, err := s.tenantAndBody(requestWith(body), &req)
		if err != nil {
			clientError(t, err)
			return
		}
		if len(req.Items) == 0 {
			return // the handler refuses it before building anything
		}
		cmds, placed, ids, err := buildPushCommands(tenant, req.Items, "fuzz-sub")
		if err != nil {
			clientError(t, err)
			return
		}
		checkPushCommands(t, req.Items, cmds, placed, ids)
	})
}

func FuzzPopQuery(f *testing.F) {
	f.Add("batch=10&wait=true&timeout=1000&leaseSeconds=30")
	f.Add("partitions=64&consumerGroup=g&subscriptionMode=new&autoAck=1")
	f.Add("subscriptionFrom=2026-01-02T03:04:05.678Z&batch=10000")
	s := fuzzServer(f, true) // subscriptionFrom=now reads the engine's clock
	f.Fuzz(func(t *testing.T, query string) {
		var args fasthttp.Args
		args.Parse(query)
		p, err := s.parsePopParams(&args)
		if err != nil {
			clientError(t, err)
			return
		}
		if p.batch < 1 || p.batch > storage.MaxPopBatch || p.partitions < 1 || p.partitions > wire.MaxPopPartitions ||
			p.timeout < 0 || p.timeout > s.cfg.PopMaxTimeout || p.group == "" ||
			(p.leaseMs != 0 && (p.leaseMs < 1000 || p.leaseMs > maxLeaseSeconds*1000)) {
			t.Fatalf("%q accepted as %+v", query, p)
		}
	})
}

func FuzzAckBody(f *testing.F) {
	f.Add([]byte(`{"transactionId":"t","partitionId":"42","leaseId":"0190f6b0-0000-7000-8000-000000000000","status":"failed","error":"e"}`))
	f.Add([]byte(`{"consumerGroup":"g","acknowledgments":[{"transactionId":"a","partitionId":1},{"transactionId":"b","partitionId":"2","consumerGroup":"h","status":"dlq"}]}`))
	f.Add([]byte(`{"acknowledgments":[{"transactionId":"a","partitionId":"x"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, batch := range []bool{false, true} {
			var items []ackItem
			var group string
			if batch {
				var req ackBatchRequest
				if err := readJSON(requestWith(body), &req); err != nil {
					clientError(t, err)
					continue
				}
				if len(req.Acknowledgments) == 0 || len(req.Acknowledgments) > wire.MaxAckItems {
					continue // refused by the handler
				}
				items, group = req.Acknowledgments, req.ConsumerGroup
			} else {
				var it ackItem
				if err := readJSON(requestWith(body), &it); err != nil {
					clientError(t, err)
					continue
				}
				items, group = []ackItem{it}, it.ConsumerGroup
			}
			cmds, placed, err := buildAckCommands(wire.DefaultTenant, group, items)
			if err != nil {
				clientError(t, err)
				continue
			}
			decoded := make([]wire.AckCmd, len(cmds))
			for i := range cmds {
				decoded[i] = reencodes(t, "ack command", cmds[i].Encode(nil), wire.DecodeAckCmd, ackEncode)
			}
			for i, it := range items {
				got := decoded[placed[i].cmd].Items[placed[i].rec]
				if string(got.TxnID) != it.TransactionID || got.PartitionID != uint64(it.PartitionID) {
					t.Fatalf("ack %d for %q in %d became %q in %d", i, it.TransactionID, it.PartitionID, got.TxnID, got.PartitionID)
				}
			}
		}
	})
}

func FuzzTransactionBody(f *testing.F) {
	f.Add([]byte(`{"operations":[{"type":"push","items":[{"queue":"out","partition":"p","payload":{},"transactionId":"x"}]},` +
		`{"type":"ack","transactionId":"t","partitionId":"42","consumerGroup":"g","status":"completed"}],` +
		`"requiredLeases":["0190f6b0-0000-7000-8000-000000000000"],` +
		`"positions":[{"queue":"q","consumerGroup":"g","partition":"p","offset":17,"metadata":"m","subscriptionMode":"all"}]}`))
	f.Add([]byte(`{"kv":[{"op":"put","ns":"app","key":"k","value":{"v":1}},{"op":"check","ns":"app","key":"k","expect":1,"required":true}],` +
		`"timers":[{"op":"schedule","queue":"q","timerKey":"t","delayMs":1000,"payload":"aGk="}]}`))
	f.Add([]byte(`{"positions":[{"queue":"q","offset":null}]}`))
	s := fuzzServer(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req txnRequest
		tenant, err := s.tenantAndBody(requestWith(body), &req)
		if err != nil {
			clientError(t, err)
			return
		}
		plan, fault := s.planTxn(context.Background(), tenant, "fuzz-sub", &req)
		if fault != nil {
			clientError(t, fault.err)
			return
		}
		cmd := reencodes(t, "transaction", plan.cmd.Encode(nil), wire.DecodeTxnCmd, txnEncode)
		for i, op := range cmd.Ops {
			switch op.Kind {
			case wire.TxnOpPush:
				reencodes(t, "transaction push", op.Body, wire.DecodePushCmd, pushEncode)
			case wire.TxnOpAck:
				reencodes(t, "transaction ack", op.Body, wire.DecodeAckCmd, ackEncode)
			case wire.TxnOpPosition:
				reencodes(t, "transaction position", op.Body, wire.DecodePositionOp, positionEncode)
			case wire.TxnOpKV:
				reencodes(t, "transaction kv", op.Body, wire.DecodeKVCmd, kvEncode)
			case wire.TxnOpTimers:
				reencodes(t, "transaction timers", op.Body, wire.DecodeTimersCmd, timersEncode)
			default:
				t.Fatalf("operation %d of kind %d", i, op.Kind)
			}
		}
		for i, pp := range plan.pushes {
			op := req.Operations[i]
			var cmds []wire.PushCmd
			for c := pp.first; c < len(cmd.Ops) && plan.requests[c] == i && plan.kinds[c] == "push"; c++ {
				pc, _ := wire.DecodePushCmd(cmd.Ops[c].Body)
				cmds = append(cmds, pc)
			}
			checkPushCommands(t, op.Items, cmds, pp.placed, pp.ids)
		}
	})
}

func FuzzConfigureBody(f *testing.F) {
	f.Add([]byte(`{"queue":"orders.eu","options":{"leaseTime":30,"retryLimit":3,"deadLetterQueue":true,"retentionSinkHold":"s3"}}`))
	f.Add([]byte(`{"queue":"q","mode":"replace","namespace":null,"task":"t","priority":-5,"minPopWaitTime":99999,"ttl":1.0}`))
	f.Add([]byte(`{"queue":"q","options":{"leaseTime":null,"retentionSinkHoldMaxSeconds":59}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var top map[string]json.RawMessage
		if err := readJSON(requestWith(body), &top); err != nil {
			clientError(t, err)
			return
		}
		cmd, err := configureCommand(wire.DefaultTenant, top)
		if err != nil {
			clientError(t, err)
			return
		}
		got := reencodes(t, "configure command", cmd.Encode(nil), wire.DecodeConfigureCmd, configureEncode)
		if got.Queue != cmd.Queue || got.Set != cmd.Set || got.Reset != cmd.Reset {
			t.Fatalf("configure %+v decoded as %+v", cmd, got)
		}
	})
}

func FuzzKVBody(f *testing.F) {
	f.Add([]byte(`{"operations":[{"op":"put","ns":"app","key":"k","value":{"a":[1,2]},"ttlSeconds":60},{"op":"get","ns":"app","key":"k"}]}`))
	f.Add([]byte(`{"operations":[{"op":"incr","ns":"c","key":"n","delta":-3,"min":0,"max":10},{"op":"getMany","ns":"c","keys":["a","b"]}]}`))
	f.Add([]byte(`{"operations":[{"op":"getPrefix","ns":"app","prefix":"k","limit":5},{"op":"delete","ns":"app","key":"k","expect":3}]}`))
	s := fuzzServer(f, false)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req struct {
			Operations []kvOpRequest `json:"operations"`
		}
		if err := readJSON(requestWith(body), &req); err != nil {
			clientError(t, err)
			return
		}
		ops, err := kvBuildOps(req.Operations, s.cfg.KVMaxValueBytes)
		if err != nil {
			clientError(t, err)
			return
		}
		cmd := wire.KVCmd{Tenant: wire.DefaultTenant, Ops: ops}
		got := reencodes(t, "kv command", cmd.Encode(nil), wire.DecodeKVCmd, kvEncode)
		if len(got.Ops) != len(req.Operations) {
			t.Fatalf("%d kv operations sent, %d in the command", len(req.Operations), len(got.Ops))
		}
	})
}

func FuzzTimersBody(f *testing.F) {
	f.Add([]byte(`{"operations":[{"op":"schedule","queue":"q","partition":"p","timerKey":"k","delayMs":5000,"payload":"aGVsbG8="}]}`))
	f.Add([]byte(`{"operations":[{"op":"cancel","queue":"q","timerKey":"k"},{"op":"reschedule","queue":"q","timerKey":"k","delayMs":-1}]}`))
	s := fuzzServer(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req struct {
			Operations []timerOpRequest `json:"operations"`
		}
		tenant, err := s.tenantAndBody(requestWith(body), &req)
		if err != nil {
			clientError(t, err)
			return
		}
		cmd, err := s.buildTimerOps(context.Background(), tenant, req.Operations)
		if err != nil {
			clientError(t, err)
			return
		}
		got := reencodes(t, "timers command", cmd.Encode(nil), wire.DecodeTimersCmd, timersEncode)
		for i, op := range got.Ops {
			if op.DelayMs < 0 || time.Duration(op.DelayMs)*time.Millisecond > s.cfg.TimersMaxHorizon {
				t.Fatalf("timer %d accepted with delay %d ms", i, op.DelayMs)
			}
		}
	})
}
