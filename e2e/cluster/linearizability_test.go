package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// A register per key, checked with porcupine. Every write uses a unique
// value, so a key's version identifies its value and a compare-and-set on
// the version (what the KV API offers) is a compare-and-set on the value.
type regInput struct {
	Op     string // get, put, cas
	Key    string
	Value  string // put, cas: the new value
	Expect string // cas: the value whose version the client expected
}

type regOutput struct {
	Value   string // get
	Applied bool   // cas
	Unknown bool   // the request failed or timed out: it may or may not have happened
}

var registerModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{""} },
	Step: func(state, input, output interface{}) []interface{} {
		cur, in, out := state.(string), input.(regInput), output.(regOutput)
		switch in.Op {
		case "get":
			if out.Value == cur {
				return []interface{}{cur}
			}
			return nil
		case "put":
			if out.Unknown {
				return []interface{}{cur, in.Value}
			}
			return []interface{}{in.Value}
		default: // cas
			switch {
			case out.Unknown && cur == in.Expect:
				return []interface{}{cur, in.Value}
			case out.Unknown:
				return []interface{}{cur}
			case out.Applied && cur == in.Expect:
				return []interface{}{in.Value}
			case !out.Applied && cur != in.Expect:
				return []interface{}{cur}
			}
			return nil
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(regInput), output.(regOutput)
		return fmt.Sprintf("%s(%s %s %s) -> %+v", in.Op, in.Key, in.Expect, in.Value, out)
	},
}

// kvRegisterClient runs operations against random nodes and records them.
type kvRegisterClient struct {
	id    int
	nodes []*harness.Node
	rng   *rand.Rand
	seen  map[string]struct { // the last value and version this client read, per key
		value   string
		version uint64
	}
}

func (c *kvRegisterClient) do(ctx context.Context, in regInput) (regOutput, bool) {
	n := c.nodes[c.rng.IntN(len(c.nodes))]
	if !n.Running() {
		return regOutput{}, false
	}
	op := map[string]any{"op": in.Op, "ns": "lin", "key": in.Key}
	switch in.Op {
	case "put":
		op["value"] = in.Value
	case "cas":
		op["op"], op["value"], op["expect"] = "put", in.Value, c.seen[in.Key].version
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	a, code, err := e2etest.KVCall(rctx, n.URL(), op)
	if err != nil || code != http.StatusOK {
		// A read that failed did nothing; a write that failed may have
		// been applied.
		return regOutput{Unknown: true}, in.Op != "get"
	}
	r := a.Results[0]
	switch in.Op {
	case "get":
		var v string
		if r.Found {
			_ = json.Unmarshal(r.Value, &v)
		}
		c.seen[in.Key] = struct {
			value   string
			version uint64
		}{v, r.Version}
		return regOutput{Value: v}, true
	case "cas":
		return regOutput{Applied: r.Applied}, true
	}
	return regOutput{}, true
}

func TestKVIsLinearizableAcrossANodeKill(t *testing.T) {
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Env: map[string]string{"QUEEN_STMT_TIMEOUT_MS": "2500"}})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	keys := []string{"a", "b", "c"}
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		start   = time.Now()
		wg      sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	for id := 0; id < 8; id++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			cl := &kvRegisterClient{id: id, nodes: c.Nodes, rng: rand.New(rand.NewPCG(uint64(id), 7)),
				seen: map[string]struct {
					value   string
					version uint64
				}{}}
			for i := 0; runCtx.Err() == nil; i++ {
				in := regInput{Key: keys[cl.rng.IntN(len(keys))]}
				switch p := cl.rng.IntN(10); {
				case p < 5:
					in.Op = "get"
				case p < 7:
					in.Op, in.Value = "put", "c"+strconv.Itoa(id)+"-"+strconv.Itoa(i)
				default:
					if _, ok := cl.seen[in.Key]; !ok {
						in.Op = "get"
						break
					}
					in.Op, in.Value, in.Expect = "cas", "c"+strconv.Itoa(id)+"-"+strconv.Itoa(i), cl.seen[in.Key].value
				}
				call := time.Since(start).Nanoseconds()
				out, record := cl.do(runCtx, in)
				ret := time.Since(start).Nanoseconds()
				if out.Unknown {
					ret = int64(1 << 62) // may take effect at any later time
				}
				if record {
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: id, Input: in, Output: out, Call: call, Return: ret})
					mu.Unlock()
				}
			}
		}(id)
	}
	// Run, kill a node (the KV group's leader, for the harder case), run,
	// restart it, run.
	phase := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	phase(3 * time.Second)
	victim := c.Nodes[e2etest.GroupLeader(t, ctx, c, e2etest.PlacementOf(ctx, t, c.Nodes[0].URL(), "").KVGroup)]
	victim.Kill()
	phase(5 * time.Second)
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	phase(4 * time.Second)
	stop()
	wg.Wait()

	res, info := porcupine.CheckOperationsVerbose(registerModel.ToModel(), history, 90*time.Second)
	if res == porcupine.Illegal {
		for i, ops := range info.PartialLinearizations() {
			t.Logf("partition %d: longest linearizable prefix %d", i, len(ops))
		}
		t.Fatalf("KV history of %d operations is not linearizable", len(history))
	}
	if res == porcupine.Unknown {
		t.Fatalf("linearizability check of %d operations timed out", len(history))
	}
	t.Logf("%d operations, linearizable", len(history))
}
