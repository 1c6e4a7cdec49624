package proxy

import (
	"encoding/json"
	"strings"
)

// Mixed routes carry operations of several kinds in one body: a
// transaction (pushes, acks, positions, KV and timers), a Streams cycle
// (sink pushes, the source's ack, state) and the KV and timer batches
// (POST /api/v1/kv, POST /api/v1/timers). Each operation
// needs what the route that does it alone needs (bodyRoutes); the
// data plane admits every one of them as it admits a route (admitBody),
// so a scope refused on the operation's own route is refused inside a
// mixed one too. A batch weighs against the rates only when it holds a
// growing operation (spec §6.6). A KV batch touching only the Kafka
// facade's group bookkeeping (namespace queen-kafka, keys qk:*) is
// consumption and is classified so.

// batchOp is what the proxy reads of one KV or timer operation; the
// field names are the broker's (http/api kvOpRequest, timerOpRequest),
// decoded by the same encoding/json, so both read the same operations.
type batchOp struct {
	Op  string `json:"op"`
	NS  string `json:"ns"`
	Key string `json:"key"`
}

// kvOpAlone is the method of the route that does a KV batch operation
// alone (/api/v1/kv/{ns}/{key}): reads are GET, writes PUT, delete
// DELETE.
var kvOpAlone = map[string]string{"get": "GET", "getMany": "GET", "getPrefix": "GET", "check": "GET",
	"put": "PUT", "putIfAbsent": "PUT", "incr": "PUT", "delete": "DELETE"}

// kvOpRoute is the route a KV operation needs. An operation the proxy
// does not know (the broker refuses it) needs admin.
func kvOpRoute(op string) Route {
	if m, ok := kvOpAlone[op]; ok {
		return Classify(m, "/api/v1/kv/ns/key")
	}
	return gated(FeatureKV, OpDelete)
}

// timerOpRoute is the route a timer operation needs: a schedule grows
// (producers schedule); cancel and reschedule change what others
// scheduled, as DELETE /api/v1/timers/{queue}/{key} does.
func timerOpRoute(op string) Route {
	if op == "schedule" {
		return gated(FeatureTimers, OpGrow)
	}
	return Classify("DELETE", "/api/v1/timers/queue/key")
}

// txnOpAlone is the route of each kind of transaction operation alone.
var txnOpAlone = map[string]string{"push": "/api/v1/push", "ack": "/api/v1/ack"}

// bodyRoutes lists the route each operation of a mixed request's body
// needs (nil for other routes); false when the body does not decode,
// which the broker would refuse too.
func bodyRoutes(path string, r Route, body []byte) ([]Route, bool) {
	var out []Route
	switch {
	case path == "/api/v1/transaction":
		var req struct {
			Operations []struct {
				Type string `json:"type"`
			} `json:"operations"`
			Positions []json.RawMessage `json:"positions"`
			KV        []batchOp         `json:"kv"`
			Timers    []batchOp         `json:"timers"`
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, false
		}
		for _, o := range req.Operations {
			if p, ok := txnOpAlone[o.Type]; ok {
				out = append(out, Classify("POST", p))
			} else {
				out = append(out, class(ClassQueueAdmin)) // the broker refuses it
			}
		}
		if len(req.Positions) > 0 {
			out = append(out, Classify("POST", "/api/v1/consumer-groups/positions"))
		}
		for _, o := range req.KV {
			out = append(out, kvOpRoute(o.Op))
		}
		for _, o := range req.Timers {
			out = append(out, timerOpRoute(o.Op))
		}
	case path == "/streams/v1/cycle":
		c, ok := decodeCycle(body)
		if !ok {
			return nil, false
		}
		// The sink's pushes are pushes and the source's acknowledgment an
		// ack; the query's own state is the processor's, which the route's
		// write authority covers.
		if c.pushes {
			out = append(out, Classify("POST", "/api/v1/push"))
		}
		if c.acks {
			out = append(out, Classify("POST", "/api/v1/ack"))
		}
	case r.Class == ClassGated && r.Op == OpMixed && (r.Feature == FeatureKV || r.Feature == FeatureTimers):
		ops, ok := batchOps(body)
		if !ok {
			return nil, false
		}
		for _, o := range ops {
			if r.Feature == FeatureKV {
				out = append(out, kvOpRoute(o.Op))
			} else {
				out = append(out, timerOpRoute(o.Op))
			}
		}
	}
	return out, true
}

// batchOps decodes a KV or timer batch's operations.
func batchOps(body []byte) ([]batchOp, bool) {
	var req struct {
		Operations []batchOp `json:"operations"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, false
	}
	return req.Operations, true
}

// cycleBody is what the proxy reads of a Streams cycle (http/api
// streamsCycleRequest): whether it pushes to the sink, acknowledges the
// source, and stores state.
type cycleBody struct {
	pushes, acks, upserts bool
}

func decodeCycle(body []byte) (cycleBody, bool) {
	var req struct {
		PushItems []json.RawMessage `json:"push_items"`
		Ack       json.RawMessage   `json:"ack"`
		StateOps  []struct {
			Type string `json:"type"`
		} `json:"state_ops"`
	}
	if json.Unmarshal(body, &req) != nil {
		return cycleBody{}, false
	}
	c := cycleBody{pushes: len(req.PushItems) > 0, acks: len(req.Ack) > 0 && string(req.Ack) != "null"}
	for _, op := range req.StateOps {
		c.upserts = c.upserts || op.Type != "delete"
	}
	return c, true
}

// refineMixed reclassifies a Mixed route from its body and the routes
// of its operations: the route to apply, and whether the batch grows
// anything.
func refineMixed(r Route, body []byte, ops []Route) (Route, bool) {
	if r.Class != ClassGated || r.Op != OpMixed {
		return r, false
	}
	if r.Feature == FeatureStreams {
		c, ok := decodeCycle(body)
		return r, !ok || c.pushes || c.upserts
	}
	batch, ok := batchOps(body)
	if !ok {
		return r, true // the broker refuses it; weigh it as growing meanwhile
	}
	if r.Feature != FeatureKV && r.Feature != FeatureTimers {
		return r, len(batch) > 0
	}
	kafkaGroups := len(batch) > 0
	for _, o := range batch {
		kafkaGroups = kafkaGroups && r.Feature == FeatureKV && o.NS == "queen-kafka" && strings.HasPrefix(o.Key, "qk:")
	}
	if kafkaGroups {
		return class(ClassConsume), false
	}
	grows := false
	for _, op := range ops {
		grows = grows || op.Op == OpGrow
	}
	return r, grows
}
