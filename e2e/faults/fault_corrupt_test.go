package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// flipInSegments finds needle in the node's stored segment files and
// changes one byte of it in place; it reports the file.
func flipInSegments(t *testing.T, dataDir string, needle []byte, at int) string {
	t.Helper()
	var hit string
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".seg") || hit != "" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		i := bytes.Index(b, needle)
		if i < 0 {
			return nil
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{b[i+at] ^ 0x20}, int64(i+at)); err != nil {
			return err
		}
		hit = path
		return f.Sync()
	})
	if err != nil {
		t.Fatal(err)
	}
	if hit == "" {
		t.Fatalf("%q is in no segment file under %s", needle, dataDir)
	}
	return hit
}

// A byte of a stored segment file changes while the node is stopped (a
// disk that rots). After the restart the node must not serve the changed
// record as valid, through any door: an HTTP fetch or pop either refuses
// the read with an error or answers what was written, a Kafka fetch the
// same; and the corruption must be reported somewhere (an error answered,
// or the node's log). Chunk checksums come from another change; until it
// is in, this test fails: the changed byte is served.
func TestFaultCorruptSegmentByte(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1})
	n := c.Nodes[0]
	ctx := e2etest.Deadline(t, 2*time.Minute)
	const count = 100
	payload := func(i int) string { return fmt.Sprintf("rot-check-%04d-%s", i, strings.Repeat("x", 40)) }
	var items []e2etest.PushItem
	for i := 0; i < count; i++ {
		items = append(items, e2etest.PushItem{Queue: "rotq", Partition: "p", Payload: payload(i), TransactionID: fmt.Sprintf("c%d", i)})
	}
	if _, code, err := e2etest.Push(ctx, n.URL(), items); err != nil || code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, err)
	}
	prod := e2etest.KgoClient(t, c, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("rot-topic"))
	for i := 0; i < count; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("kafka-check-%04d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()
	if !n.Terminate(30 * time.Second) {
		t.Fatal("the node did not stop")
	}
	data := filepath.Join(n.Dir, "data")
	t.Logf("changed a byte of %s", flipInSegments(t, data, []byte(payload(42)), len("rot-")))
	t.Logf("changed a byte of %s", flipInSegments(t, data, []byte("kafka-check-0042"), len("kafka-")))

	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := n.WaitHealthy(hctx)
	cancel()
	reported := false
	if err != nil {
		t.Logf("the node did not come back healthy: %v", err)
		reported = true
	}
	if n.Running() {
		// HTTP fetch: every record answered is what was pushed.
		recs, _, ferr := e2etest.FetchAll(ctx, n.URL(), "rotq", "p")
		if ferr != nil {
			t.Logf("HTTP fetch refused: %v", ferr)
			reported = true
		}
		for _, r := range recs {
			var got string
			_ = json.Unmarshal(r.Payload, &got)
			if got != payload(int(r.Offset)) {
				t.Errorf("HTTP fetch served offset %d as %q, pushed as %q", r.Offset, got, payload(int(r.Offset)))
			}
		}
		// HTTP pop: every message delivered is what was pushed.
		for try := 0; try < 20; try++ {
			ans, code, perr := e2etest.Pop(ctx, n.URL(), e2etest.PopPath("rotq", "batch=50"))
			if perr != nil || code >= 500 {
				t.Logf("HTTP pop refused: %d %v", code, perr)
				reported = true
				break
			}
			if code != http.StatusOK {
				break
			}
			for _, m := range ans.Messages {
				var got string
				_ = json.Unmarshal(m.Data, &got)
				if got != payload(int(m.Offset)) {
					t.Errorf("HTTP pop delivered offset %d as %q, pushed as %q", m.Offset, got, payload(int(m.Offset)))
				}
			}
			_, _, _ = ackBatch(ctx, n.URL(), e2etest.AcksOf(ans.Messages, "completed"))
		}
		// Kafka fetch: every record answered is what was produced.
		cons := e2etest.KgoClient(t, c, kgo.ConsumeTopics("rot-topic"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		kctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		seen, refused := 0, false
		for seen < count && kctx.Err() == nil && !refused {
			fs := cons.PollFetches(kctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if kctx.Err() == nil && !refused {
					t.Logf("Kafka fetch refused: %v", err)
					reported, refused = true, true
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				seen++
				if want := fmt.Sprintf("kafka-check-%04d", r.Offset); string(r.Value) != want {
					t.Errorf("Kafka fetch served offset %d as %q, produced as %q", r.Offset, r.Value, want)
				}
			})
		}
		cancel()
	}
	if strings.Contains(n.Log(), "corrupt") {
		reported = true
	}
	if !reported {
		t.Error("the changed bytes were neither refused nor reported")
	}
}
