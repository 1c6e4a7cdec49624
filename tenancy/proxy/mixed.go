package proxy

import (
	"encoding/json"
	"strings"
)

// Mixed gated routes (POST /api/v1/kv, POST /api/v1/timers) batch
// operations of several kinds; they weigh against the rates only when the
// batch holds a growing one (spec §6.6). A KV batch touching only the
// Kafka facade's group bookkeeping (namespace queen-kafka, keys qk:*) is
// consumption and is classified so.

// kvGrowingOps are the KV operations that add data.
var kvGrowingOps = map[string]bool{"put": true, "putIfAbsent": true, "incr": true}

// refineMixed reclassifies a Mixed route from its body: the route to
// apply, and whether the batch grows anything.
func refineMixed(r Route, body []byte) (Route, bool) {
	if r.Class != ClassGated || r.Op != OpMixed {
		return r, false
	}
	var req struct {
		Operations []struct {
			Op  string `json:"op"`
			NS  string `json:"ns"`
			Key string `json:"key"`
		} `json:"operations"`
	}
	if json.Unmarshal(body, &req) != nil {
		return r, true // the broker refuses it; weigh it as growing meanwhile
	}
	grows, kafkaGroups := false, len(req.Operations) > 0
	for _, o := range req.Operations {
		switch r.Feature {
		case FeatureKV:
			grows = grows || kvGrowingOps[o.Op]
			kafkaGroups = kafkaGroups && o.NS == "queen-kafka" && strings.HasPrefix(o.Key, "qk:")
		case FeatureTimers:
			grows = grows || o.Op == "schedule"
		default:
			grows = true
		}
	}
	if r.Feature == FeatureKV && kafkaGroups {
		return class(ClassConsume), false
	}
	return r, grows
}
