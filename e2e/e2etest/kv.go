package e2etest

import (
	"context"
	"encoding/json"
	"net/http"
)

// KVCall sends ops in one /api/v1/kv request to the node at base.
func KVCall(ctx context.Context, base string, ops ...map[string]any) (KVAnswer, int, error) {
	var out KVAnswer
	code, err := Call(ctx, http.MethodPost, base+"/api/v1/kv", map[string]any{"operations": ops}, &out)
	return out, code, err
}

// KVAnswer is the body of /api/v1/kv.
type KVAnswer struct {
	OK          bool       `json:"ok"`
	Reason      string     `json:"reason"`
	FailedIndex int        `json:"failedIndex"`
	KVReason    string     `json:"kvReason"`
	Results     []KVResult `json:"results"`
}

// KVResult is the answer of one KV operation.
type KVResult struct {
	Applied bool            `json:"applied"`
	Reason  *string         `json:"reason"`
	Value   json.RawMessage `json:"value"`
	Version uint64          `json:"version"`
	Found   bool            `json:"found"`
}
