package http

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// TestEncryptedQueuesKeepEveryUserFieldOffDisk: with QUEEN_ENCRYPTION_KEY
// set, a queue pushed over HTTP (payload, trace id), a consumer's DLQ error
// text, trace data, and a topic produced over Kafka (keys, header names and
// values, values, a tombstone's key) leave none of their clear text in any
// file under the node's data dir, and every read — pop, the DLQ listing,
// traces, Kafka fetch — gives them back intact. A record produced before
// the topic was encrypted stays readable (and is found by the scan, which
// so proves it can see what is on disk).
func TestEncryptedQueuesKeepEveryUserFieldOffDisk(t *testing.T) {
	key := hex.EncodeToString(randBytes(32))
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_ENCRYPTION_KEY": key,
		"QUEEN_KAFKA_DEFAULT_PARTITIONS": "1"}})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 2*time.Minute)
	tag := hex.EncodeToString(randBytes(6))
	mark := func(what string) string { return what + "-MARK-" + tag }
	configure := func(queue string) {
		t.Helper()
		if code, err := e2etest.Call(ctx, "POST", n.URL()+"/api/v1/configure",
			map[string]any{"queue": queue, "options": map[string]any{"encryptionEnabled": true}}, nil); err != nil || code != 200 {
			t.Fatalf("configure %s: %d %v", queue, code, err)
		}
	}

	// HTTP: push, pop, trace, dead-letter with an error text.
	configure("vault")
	if code, err := e2etest.Call(ctx, "POST", n.URL()+"/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "vault",
		"payload": map[string]any{"card": mark("PAYLOAD")}, "transactionId": "tx-e2e", "traceId": mark("TRACEID")}}}, nil); err != nil || code != 201 {
		t.Fatalf("push: %d %v", code, err)
	}
	var popped struct {
		Messages []struct {
			TransactionID string          `json:"transactionId"`
			TraceID       string          `json:"traceId"`
			Data          json.RawMessage `json:"data"`
			PartitionID   string          `json:"partitionId"`
			LeaseID       string          `json:"leaseId"`
		} `json:"messages"`
	}
	if code, err := e2etest.Call(ctx, "GET", n.URL()+"/api/v1/pop/queue/vault?batch=10", nil, &popped); err != nil || code != 200 || len(popped.Messages) != 1 {
		t.Fatalf("pop: %d %v %+v", code, err, popped)
	}
	m := popped.Messages[0]
	if !strings.Contains(string(m.Data), mark("PAYLOAD")) || m.TraceID != mark("TRACEID") || m.TransactionID != "tx-e2e" {
		t.Fatalf("popped: %+v", m)
	}
	if code, err := e2etest.Call(ctx, "POST", n.URL()+"/api/v1/traces", map[string]any{"transactionId": "tx-e2e", "partitionId": m.PartitionID,
		"data": map[string]any{"note": mark("TRACEDATA")}, "traceNames": []string{"e2e-trace"}}, nil); err != nil || code != 201 {
		t.Fatalf("trace: %d %v", code, err)
	}
	if code, err := e2etest.Call(ctx, "POST", n.URL()+"/api/v1/ack", map[string]any{"transactionId": "tx-e2e", "partitionId": m.PartitionID,
		"leaseId": m.LeaseID, "status": "dlq", "error": mark("ERRTEXT")}, nil); err != nil || code != 200 {
		t.Fatalf("ack: %d %v", code, err)
	}

	// Kafka: one record before the topic is encrypted, then keyed records
	// with headers and a tombstone.
	prod := e2etest.KafkaClient(t, n, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("ktopic"))
	before := &kgo.Record{Key: []byte("CLEARKEY-" + tag), Value: []byte("CLEARVAL-" + tag)}
	if err := prod.ProduceSync(ctx, before).FirstErr(); err != nil {
		t.Fatal(err)
	}
	configure("ktopic")
	sealed := []*kgo.Record{
		{Key: []byte(mark("KEY")), Value: []byte(mark("VALUE")),
			Headers: []kgo.RecordHeader{{Key: mark("HNAME"), Value: []byte(mark("HVALUE"))}}},
		{Key: []byte(mark("TOMBKEY"))},
	}
	if err := prod.ProduceSync(ctx, sealed...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Everything reads back in clear.
	cons := e2etest.KafkaClient(t, n, kgo.ConsumeTopics("ktopic"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := e2etest.ConsumeN(ctx, t, cons, 3)
	for i, want := range []*kgo.Record{before, sealed[0], sealed[1]} {
		r := got[i]
		ok := bytes.Equal(r.Key, want.Key) && bytes.Equal(r.Value, want.Value) && (r.Value == nil) == (want.Value == nil) &&
			len(r.Headers) == len(want.Headers)
		for h := 0; ok && h < len(r.Headers); h++ {
			ok = r.Headers[h].Key == want.Headers[h].Key && bytes.Equal(r.Headers[h].Value, want.Headers[h].Value)
		}
		if !ok {
			t.Fatalf("kafka record %d: key %q value %q headers %v", i, r.Key, r.Value, r.Headers)
		}
	}
	// The topic's records over HTTP too (values as JSON strings).
	recs, _, err := e2etest.FetchAll(ctx, n.URL(), "ktopic", "0")
	if err != nil || len(recs) != 3 || string(recs[1].Payload) != `"`+mark("VALUE")+`"` {
		t.Fatalf("http fetch of the topic: %v %d %+v", err, len(recs), recs)
	}
	var dlq struct {
		Messages []struct {
			ErrorMessage string          `json:"errorMessage"`
			TraceID      string          `json:"traceId"`
			Data         json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	if code, err := e2etest.Call(ctx, "GET", n.URL()+"/api/v1/dlq?queue=vault", nil, &dlq); err != nil || code != 200 || len(dlq.Messages) != 1 {
		t.Fatalf("dlq: %d %v %+v", code, err, dlq)
	}
	if d := dlq.Messages[0]; d.ErrorMessage != mark("ERRTEXT") || d.TraceID != mark("TRACEID") || !strings.Contains(string(d.Data), mark("PAYLOAD")) {
		t.Fatalf("dlq row: %+v (data %s)", d, d.Data)
	}
	var traces struct {
		Traces []struct {
			Data json.RawMessage `json:"data"`
		} `json:"traces"`
	}
	if code, err := e2etest.Call(ctx, "GET", n.URL()+"/api/v1/traces/by-name/e2e-trace", nil, &traces); err != nil || code != http.StatusOK ||
		len(traces.Traces) != 1 || !strings.Contains(string(traces.Traces[0].Data), mark("TRACEDATA")) {
		t.Fatalf("traces: %d %v %+v", code, err, traces)
	}

	// Stopped, the stores have flushed; nothing user-written is in clear.
	n.Stop()
	for _, what := range []string{"PAYLOAD", "TRACEID", "TRACEDATA", "ERRTEXT", "KEY", "VALUE", "HNAME", "HVALUE", "TOMBKEY"} {
		if hits := raftgroupstest.FilesContaining(t, n.Dir, []byte(mark(what))); len(hits) != 0 {
			t.Errorf("%s in clear on disk: %v", what, hits)
		}
	}
	if hits := raftgroupstest.FilesContaining(t, n.Dir, []byte("CLEARKEY-"+tag)); len(hits) == 0 {
		t.Error("the record produced before encryption was turned on is not found: the scan proves nothing")
	}
}
