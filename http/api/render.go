package api

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/queen-mq/queen/wire"
)

// renderData turns stored payload bytes into the JSON a Queen client sees
// (spec decision 3): JSON text as itself, other UTF-8 text as a string,
// anything else as base64 (and the caller adds "encoding":"base64").
func renderData(rec *wire.Record) (data json.RawMessage, base64Encoded bool) {
	switch {
	case rec.Flags&wire.FlagNullValue != 0:
		return json.RawMessage("null"), false
	case rec.Flags&wire.FlagJSON != 0 || json.Valid(rec.Payload):
		if len(rec.Payload) == 0 {
			return json.RawMessage(`""`), false
		}
		return json.RawMessage(rec.Payload), false
	}
	return renderBytes(rec.Payload)
}

// renderBytes renders bytes as a JSON string when they are UTF-8 text,
// else as a base64 JSON string.
func renderBytes(b []byte) (json.RawMessage, bool) {
	if utf8.Valid(b) {
		s, _ := json.Marshal(string(b))
		return s, false
	}
	return json.RawMessage(strconv.Quote(base64.StdEncoding.EncodeToString(b))), true
}

// isoMillis formats unix milliseconds the way Queen does: RFC 3339 UTC with
// milliseconds.
func isoMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// kafkaHeader is a Kafka record header as an HTTP client sees it.
type kafkaHeader struct {
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value"`
	Encoding string          `json:"encoding,omitempty"`
}

func renderHeaders(hs []wire.Header) []kafkaHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kafkaHeader, len(hs))
	for i, h := range hs {
		out[i].Key = h.Key
		if h.Value == nil {
			out[i].Value = json.RawMessage("null")
			continue
		}
		v, b64 := renderBytes(h.Value)
		out[i].Value = v
		if b64 {
			out[i].Encoding = "base64"
		}
	}
	return out
}

// txnIDOf is the transaction id a client addresses a record by.
func txnIDOf(rec *wire.Record) string {
	if rec.Flags&wire.FlagTxnID != 0 {
		return string(rec.TxnID)
	}
	return rec.MsgID.String()
}

func optString(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// recordView is a stored record rendered for JSON: its value, key and
// headers, with the encodings a client needs to decode them.
type recordView struct {
	value       json.RawMessage
	encoding    string
	key         json.RawMessage
	keyEncoding string
	headers     []kafkaHeader
}

func viewOf(rec *wire.Record) recordView {
	var v recordView
	var b64 bool
	if v.value, b64 = renderData(rec); b64 {
		v.encoding = "base64"
	}
	if rec.Flags&wire.FlagKey != 0 {
		if v.key, b64 = renderBytes(rec.Key); b64 {
			v.keyEncoding = "base64"
		}
	}
	v.headers = renderHeaders(rec.Headers)
	return v
}
