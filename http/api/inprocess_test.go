package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// node is a single-node queen in this process: a raft host, its engine
// and the HTTP API on free 127.0.0.1 ports.
type node struct {
	engine *raftgroups.Engine
	srv    *Server
	url    string
}

func startNode(t *testing.T) *node {
	t.Helper()
	return startNodeWith(t, nil)
}

func startNodeWith(t *testing.T, adjust func(*raftgroups.Config)) *node {
	t.Helper()
	return startNodeConfig(t, adjust, nil)
}

// startNodeConfig starts a node whose raft and HTTP configs adjust and edit
// may change (either may be nil).
func startNodeConfig(t *testing.T, adjust func(*raftgroups.Config), edit func(*Config)) *node {
	t.Helper()
	_, engine := raftgroupstest.StartWith(t, adjust)
	return serveEngine(t, engine, edit)
}

// serveEngine starts the HTTP API over engine, stopped when the test ends.
func serveEngine(t *testing.T, engine *raftgroups.Engine, edit func(*Config)) *node {
	t.Helper()
	cfg := Config{Addr: raftgroupstest.FreeAddr(t), MaxBodyBytes: 1 << 20}
	if edit != nil {
		edit(&cfg)
	}
	srv := New(cfg, engine, raftgroupstest.Quiet)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &node{engine: engine, srv: srv, url: "http://" + srv.Addr()}
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v (%s)", url, err, b)
		}
	}
	return resp.StatusCode
}

// Records appended through the engine the way the Kafka door does (no
// JSON flag, a key, headers, no transaction index) pop over HTTP per
// decision 3: data as JSON when the bytes are JSON, else a string when
// they are UTF-8, else base64 with "encoding":"base64"; key and headers
// alongside.
func TestKafkaRecordsPopAsDecisionThreeSays(t *testing.T) {
	n := startNode(t)
	binary := []byte{0xff, 0x00, 0xfe}
	recs := []wire.Record{
		{Flags: wire.FlagKey | wire.FlagHeaders | wire.FlagTimestamp, MsgID: wire.ID{1, 1}, Key: []byte("k1"),
			Headers: []wire.Header{{Key: "h", Value: []byte("v")}, {Key: "bin", Value: binary}, {Key: "nil"}}, Timestamp: 5, Payload: []byte("plain text")},
		{Flags: wire.FlagKey, MsgID: wire.ID{1, 2}, Key: binary, Payload: binary},
		{MsgID: wire.ID{1, 3}, Payload: []byte(`{"json":true}`)},
	}
	var body []byte
	for i := range recs {
		body = wire.AppendRecord(body, &recs[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cat, parts, err := n.engine.EnsureQueue(ctx, wire.DefaultTenant, "topic", 1, true, true)
	if err != nil {
		t.Fatal(err)
	}
	produce := wire.KafkaProduceCmd{ProducerID: wire.NoProducer,
		Push: wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "topic", PartitionIndex: 0, Inc: cat.Inc, Count: len(recs), Records: body}}
	wait, err := n.engine.KafkaProduce([]raftgroups.KafkaBody{{Group: int(parts[0].Group), Body: produce.Encode(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := wait(ctx); err != nil || res[0].Code != wire.CodeOK {
		t.Fatalf("produce: %v %+v", err, res)
	}
	var ans struct {
		PartitionID string `json:"partitionId"`
		LeaseID     string `json:"leaseId"`
		Messages    []struct {
			ID          string          `json:"id"`
			TxnID       string          `json:"transactionId"`
			Data        json.RawMessage `json:"data"`
			Encoding    string          `json:"encoding"`
			Key         json.RawMessage `json:"key"`
			KeyEncoding string          `json:"keyEncoding"`
			Headers     []struct {
				Key      string          `json:"key"`
				Value    json.RawMessage `json:"value"`
				Encoding string          `json:"encoding"`
			} `json:"headers"`
		} `json:"messages"`
	}
	if code := getJSON(t, n.url+"/api/v1/pop/queue/topic?batch=10", &ans); code != http.StatusOK || len(ans.Messages) != 3 {
		t.Fatalf("pop: %d %+v", code, ans)
	}
	b64 := `"` + base64.StdEncoding.EncodeToString(binary) + `"`
	m := ans.Messages
	if string(m[0].Data) != `"plain text"` || m[0].Encoding != "" || string(m[0].Key) != `"k1"` || len(m[0].Headers) != 3 ||
		string(m[0].Headers[0].Value) != `"v"` || string(m[0].Headers[1].Value) != b64 || m[0].Headers[1].Encoding != "base64" ||
		string(m[0].Headers[2].Value) != "null" {
		t.Fatalf("text record: %+v", m[0])
	}
	if string(m[1].Data) != b64 || m[1].Encoding != "base64" || string(m[1].Key) != b64 || m[1].KeyEncoding != "base64" || m[1].Headers != nil {
		t.Fatalf("binary record: %+v", m[1])
	}
	if string(m[2].Data) != `{"json":true}` || m[2].Encoding != "" || m[2].Key != nil {
		t.Fatalf("JSON bytes: %+v", m[2])
	}
	// Records without a transaction index are acknowledged by message id.
	var items []map[string]any
	for _, msg := range m {
		items = append(items, map[string]any{"transactionId": msg.TxnID, "partitionId": ans.PartitionID, "leaseId": ans.LeaseID})
	}
	b, _ := json.Marshal(map[string]any{"acknowledgments": items})
	resp, err := http.Post(n.url+"/api/v1/ack/batch", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var acks []struct {
		Success       bool `json:"success"`
		LeaseReleased bool `json:"leaseReleased"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&acks)
	resp.Body.Close()
	if len(acks) != 3 || !acks[0].Success || !acks[2].Success || !acks[2].LeaseReleased {
		t.Fatalf("acks: %+v", acks)
	}
}

// Thousands of parked long polls cost little: each is a goroutine, a timer
// and a share of one wake-up channel. They all answer 204 at their
// timeout, and a push wakes one of them with the message.
func TestThousandsOfParkedPopsAreCheap(t *testing.T) {
	n := startNode(t)
	parked := 2000
	if raceEnabled {
		parked = 1000 // four goroutines each, under the race detector's 8128
	}
	// Every poll must park before the first one times out; 2,000
	// connections took over 2.5 s on a loaded 2-core machine, so the
	// polls wait 10 s.
	const timeout = 10 * time.Second
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: parked, MaxConnsPerHost: parked}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The queue exists and is empty.
	if _, err := n.engine.Configure(ctx, &wire.ConfigureCmd{Tenant: wire.DefaultTenant, Queue: "idle", Config: wire.DefaultQueueConfig()}); err != nil {
		t.Fatal(err)
	}
	before := heapAndGoroutines()
	type outcome struct {
		status  int
		elapsed time.Duration
		err     error
	}
	results := make(chan outcome, parked)
	var started sync.WaitGroup
	url := fmt.Sprintf("%s/api/v1/pop/queue/idle?wait=true&timeout=%d", n.url, timeout.Milliseconds())
	begin := time.Now()
	for i := 0; i < parked; i++ {
		started.Add(1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			start := time.Now()
			started.Done()
			resp, err := client.Do(req)
			if err != nil {
				results <- outcome{err: err}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results <- outcome{status: resp.StatusCode, elapsed: time.Since(start)}
		}()
	}
	started.Wait()
	// Wait until every poll is parked on the server: its watchers hold
	// them all (read through the long-poll gate's bookkeeping).
	for n.srv.parkedPops() < parked {
		if time.Since(begin) > timeout-500*time.Millisecond {
			t.Fatalf("only %d of %d polls parked in time", n.srv.parkedPops(), parked)
		}
		time.Sleep(5 * time.Millisecond)
	}
	during := heapAndGoroutines()
	perPoll := (during.heap - before.heap) / uint64(parked)
	t.Logf("%d parked pops: %d goroutines more (client and server), heap +%d KiB, %d bytes each",
		parked, during.goroutines-before.goroutines, (during.heap-before.heap)>>10, perPoll)
	// Client and server halves together, with HTTP buffers: a parked pop
	// must stay far below what a thread or a polling loop would cost.
	if perPoll > 64<<10 {
		t.Fatalf("a parked pop costs %d bytes of heap", perPoll)
	}

	// One push wakes the polls; one of them takes the message.
	if _, err := n.engine.Push(ctx, wire.DefaultTenant, []wire.PushCmd{{Tenant: wire.DefaultTenant, Queue: "idle", Partition: "p", PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: 1,
		Records: wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: wire.ID{9}, Payload: []byte("1")})}}); err != nil {
		t.Fatal(err)
	}
	got, empty := 0, 0
	for i := 0; i < parked; i++ {
		o := <-results
		switch {
		case o.err != nil:
			t.Fatal(o.err)
		case o.status == http.StatusOK:
			got++
		case o.status == http.StatusNoContent:
			empty++
			// An empty answer comes at the timeout, not before, and not
			// long after: no poll was forgotten.
			if o.elapsed < timeout-50*time.Millisecond || o.elapsed > timeout+5*time.Second {
				t.Fatalf("a 204 after %v, timeout %v", o.elapsed, timeout)
			}
		default:
			t.Fatalf("status %d", o.status)
		}
	}
	if got != 1 || empty != parked-1 {
		t.Fatalf("%d polls got the message, %d answered empty", got, empty)
	}
}

type usage struct {
	heap       uint64
	goroutines int
}

func heapAndGoroutines() usage {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return usage{heap: m.HeapAlloc, goroutines: runtime.NumGoroutine()}
}
