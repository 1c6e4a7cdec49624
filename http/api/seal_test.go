package api

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// In an encrypted queue the trace id, a consumer's error text (kept in the
// DLQ row) and trace data are sealed as well as the payload: none of them
// is in the node's files, and every read — pop, the message view, the DLQ
// listing, the traces — answers them in clear. Only the transaction id
// stays readable (docs/security.md).
func TestEncryptedQueueSealsTraceErrorAndTraceData(t *testing.T) {
	host, n, dir := startVault(t)
	const (
		payloadMark = "PAYLOAD-MARK-51c0"
		traceIDMark = "TRACEID-MARK-51c0"
		errMark     = "ERRTEXT-MARK-51c0"
		dataMark    = "TRACEDATA-MARK-51c0"
	)
	if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "vault",
		"payload": map[string]any{"p": payloadMark}, "transactionId": "tx-1", "traceId": traceIDMark}}}, nil); code != 201 {
		t.Fatalf("push: %d", code)
	}
	var pa popAnswer
	if code := getJSON(t, n.url+"/api/v1/pop/queue/vault?batch=10", &pa); code != 200 || len(pa.Messages) != 1 {
		t.Fatalf("pop: %d %+v", code, pa)
	}
	m := pa.Messages[0]
	if !strings.Contains(string(m.Data), payloadMark) || m.TraceID == nil || *m.TraceID != traceIDMark || m.TransactionID != "tx-1" {
		t.Fatalf("popped: %+v", m)
	}
	if code := postJSON(t, n.url+"/api/v1/traces", map[string]any{"transactionId": "tx-1", "partitionId": m.PartitionID,
		"data": map[string]any{"note": dataMark}}, nil); code != 201 {
		t.Fatalf("trace: %d", code)
	}
	var acks []ackAnswer
	if code := postJSON(t, n.url+"/api/v1/ack", map[string]any{"transactionId": "tx-1", "partitionId": m.PartitionID,
		"leaseId": *m.LeaseID, "status": "dlq", "error": errMark}, &acks); code != 200 || len(acks) != 1 || !acks[0].DLQ {
		t.Fatalf("ack: %d %+v", code, acks)
	}

	var dlq struct{ Messages []dlqMessage }
	if code := getJSON(t, n.url+"/api/v1/dlq?queue=vault", &dlq); code != 200 || len(dlq.Messages) != 1 {
		t.Fatalf("dlq: %d %+v", code, dlq)
	}
	d := dlq.Messages[0]
	data, _ := json.Marshal(d.Data)
	if d.ErrorMessage == nil || *d.ErrorMessage != errMark || !strings.Contains(string(data), payloadMark) ||
		d.TraceID == nil || *d.TraceID != traceIDMark {
		t.Fatalf("dlq row: %+v (data %s)", d, data)
	}
	var traces struct {
		Traces []traceAnswer `json:"traces"`
	}
	if code := getJSON(t, n.url+"/api/v1/traces/"+m.PartitionID+"/tx-1", &traces); code != 200 || len(traces.Traces) != 1 ||
		!strings.Contains(string(traces.Traces[0].Data), dataMark) {
		t.Fatalf("traces: %d %+v", code, traces)
	}
	var msg map[string]any
	if code := getJSON(t, n.url+"/api/v1/messages/"+m.PartitionID+"/"+url.PathEscape("tx-1"), &msg); code != 200 ||
		msg["traceId"] != traceIDMark || msg["errorMessage"] != errMark || msg["isEncrypted"] != true {
		t.Fatalf("message: %d %v", code, msg)
	}
	notOnDisk(t, host, dir, payloadMark, traceIDMark, errMark, dataMark)
}

// A transaction seals as a push and an ack do: its pushed payload and
// trace id, and its ack's error text, are not in the node's files, and
// read back in clear.
func TestEncryptedQueueSealsTransactionPushAndAckError(t *testing.T) {
	host, n, dir := startVault(t)
	const (
		payloadMark = "TXPAYLOAD-MARK-2b7e"
		traceIDMark = "TXTRACE-MARK-2b7e"
		errMark     = "TXERR-MARK-2b7e"
	)
	if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "vault",
		"payload": "first", "transactionId": "tx-a"}}}, nil); code != 201 {
		t.Fatalf("push: %d", code)
	}
	var pa popAnswer
	if code := getJSON(t, n.url+"/api/v1/pop/queue/vault?batch=1", &pa); code != 200 || len(pa.Messages) != 1 {
		t.Fatalf("pop: %d %+v", code, pa)
	}
	m := pa.Messages[0]
	var ans struct{ Success bool }
	if code := postJSON(t, n.url+"/api/v1/transaction", map[string]any{"operations": []map[string]any{
		{"type": "ack", "transactionId": "tx-a", "partitionId": m.PartitionID, "leaseId": *m.LeaseID, "status": "dlq", "error": errMark},
		{"type": "push", "items": []map[string]any{{"queue": "vault", "payload": map[string]any{"p": payloadMark},
			"transactionId": "tx-b", "traceId": traceIDMark}}},
	}}, &ans); code != 200 || !ans.Success {
		t.Fatalf("transaction: %d %+v", code, ans)
	}
	if code := getJSON(t, n.url+"/api/v1/pop/queue/vault?batch=1", &pa); code != 200 || len(pa.Messages) != 1 ||
		!strings.Contains(string(pa.Messages[0].Data), payloadMark) || *pa.Messages[0].TraceID != traceIDMark {
		t.Fatalf("pop of the transaction's push: %d %+v", code, pa)
	}
	var dlq struct{ Messages []dlqMessage }
	if code := getJSON(t, n.url+"/api/v1/dlq?queue=vault", &dlq); code != 200 || len(dlq.Messages) != 1 ||
		dlq.Messages[0].ErrorMessage == nil || *dlq.Messages[0].ErrorMessage != errMark {
		t.Fatalf("dlq: %d %+v", code, dlq)
	}
	notOnDisk(t, host, dir, payloadMark, traceIDMark, errMark)
}

// A timer scheduled into an encrypted queue keeps its payload sealed while
// it waits and in the record it fires, which pops in clear.
func TestEncryptedQueueSealsTimerPayloads(t *testing.T) {
	host, n, dir := startVault(t)
	const mark = "TIMER-MARK-83a1"
	payload := base64.StdEncoding.EncodeToString([]byte(`{"t":"` + mark + `"}`))
	if code := postJSON(t, n.url+"/api/v1/timers", map[string]any{"operations": []map[string]any{{"op": "schedule",
		"queue": "vault", "timerKey": "k1", "delayMs": 0, "payload": payload}}}, nil); code != 200 {
		t.Fatalf("schedule: %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	var pa popAnswer
	for {
		pa = popAnswer{}
		if code := getJSON(t, n.url+"/api/v1/pop/queue/vault?batch=1", &pa); code == 200 && len(pa.Messages) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timer did not fire")
		}
		time.Sleep(20 * time.Millisecond) // polling for the fire, bounded by the deadline
	}
	if !strings.Contains(string(pa.Messages[0].Data), mark) {
		t.Fatalf("fired: %s", pa.Messages[0].Data)
	}
	notOnDisk(t, host, dir, mark)
}

// startVault starts a node with an encryption key and the HTTP API over
// it, with the queue "vault" configured encrypted; dir is its data dir.
func startVault(t *testing.T) (host *raftgroups.Host, n *node, dir string) {
	t.Helper()
	host, engine, dir := raftgroupstest.StartKeyed(t)
	n = serveEngine(t, engine, nil)
	if code := postJSON(t, n.url+"/api/v1/configure", map[string]any{"queue": "vault",
		"options": map[string]any{"encryptionEnabled": true}}, nil); code != 200 {
		t.Fatalf("configure: %d", code)
	}
	return host, n, dir
}

// notOnDisk closes host, so every store has flushed what it holds, and
// fails the test for each mark found in a file under dir.
func notOnDisk(t *testing.T, host *raftgroups.Host, dir string, marks ...string) {
	t.Helper()
	host.Close()
	for _, mark := range marks {
		if hits := raftgroupstest.FilesContaining(t, dir, []byte(mark)); len(hits) != 0 {
			t.Errorf("%s in clear on disk: %v", mark, hits)
		}
	}
}
