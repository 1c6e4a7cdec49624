package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// postAny posts body as JSON and decodes the answer, an error's too.
func postAny(t *testing.T, url string, body, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %d %v (%s)", url, resp.StatusCode, err, raw)
	}
	return resp.StatusCode
}

// A push to a partition sealed for a move is a 503 partition_moving as a
// whole; a move started with POST /api/v1/system/partitions/moves is
// listed by GET with its progress until done, and the partition takes
// pushes in its new group. Refusals are JSON errors.
func TestPartitionMovesRoute(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	push := func() (int, map[string]any) {
		var out any
		code := postAny(t, n.url+"/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "rm", "partition": "p", "payload": 1}}}, &out)
		m, _ := out.(map[string]any)
		return code, m
	}
	if code, _ := push(); code != http.StatusCreated {
		t.Fatal(code)
	}
	for g := range 3 {
		for n.engine.ActiveFormat(g) < wire.FormatV9 {
			if ctx.Err() != nil {
				t.Fatal("format 9 never reached")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	d, _ := n.engine.DirByName(wire.DefaultTenant, "rm", "p")
	cat, _ := n.engine.Catalog(wire.DefaultTenant, "rm")
	seal := func(unseal bool) {
		t.Helper()
		c := wire.MoveSealCmd{Tenant: wire.DefaultTenant, Queue: "rm", Inc: cat.Inc, Index: d.Index, Unseal: unseal}
		if _, err := n.engine.Propose(ctx, int(d.Group), wire.Command{Kind: wire.KindMoveSeal, Body: c.Encode(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	seal(false)
	if code, body := push(); code != http.StatusServiceUnavailable || body["code"] != "partition_moving" || body["error"] == "" {
		t.Fatalf("a push to a sealed partition: %d %v", code, body)
	}
	seal(true)

	to := (int(d.Group) + 1) % 3
	var bad map[string]any
	if code := postAny(t, n.url+"/api/v1/system/partitions/moves", map[string]any{"queue": "rm", "partition": "p", "group": int(d.Group)}, &bad); code != http.StatusBadRequest || bad["code"] != "bad_request" {
		t.Fatalf("a move to where it is: %d %v", code, bad)
	}
	if code := postAny(t, n.url+"/api/v1/system/partitions/moves", map[string]any{"queue": "rm", "partition": "nope", "group": to}, &bad); code != http.StatusNotFound {
		t.Fatalf("a move of an unknown partition: %d %v", code, bad)
	}
	var started struct{ State string }
	if code := postJSON(t, n.url+"/api/v1/system/partitions/moves", map[string]any{"queue": "rm", "partition": "p", "group": to}, &started); code != http.StatusAccepted || started.State != "copying" {
		t.Fatalf("start: %d %+v", code, started)
	}
	for {
		var list struct {
			Moves []struct {
				Queue, Partition, State string
				From, To                int
				CopiedOffset, EndOffset uint64
			}
		}
		if code := getJSON(t, n.url+"/api/v1/system/partitions/moves?queue=rm", &list); code != http.StatusOK || len(list.Moves) != 1 {
			t.Fatalf("list: %d %+v", code, list)
		}
		m := list.Moves[0]
		if m.State == "done" {
			if m.Partition != "p" || m.From != int(d.Group) || m.To != to || m.CopiedOffset != 1 || m.EndOffset != 1 {
				t.Fatalf("done: %+v", m)
			}
			break
		}
		if m.State == "failed" || ctx.Err() != nil {
			t.Fatalf("move: %+v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var answers []map[string]any
	if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "rm", "partition": "p", "payload": 2}}}, &answers); code != http.StatusCreated || len(answers) != 1 || answers[0]["offset"] != float64(1) {
		t.Fatalf("a push after the move: %d %v", code, answers)
	}
	if now, _ := n.engine.DirByName(wire.DefaultTenant, "rm", "p"); int(now.Group) != to {
		t.Fatalf("directory: %+v", now)
	}
}
