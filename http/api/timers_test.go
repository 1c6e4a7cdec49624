package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/queen-mq/queen/wire"
)

// zstdOf compresses n zero bytes as concatenated frames of 512 KiB each
// (a valid zstd stream): a few KB that decode to n. Each frame is small,
// so a per-frame memory limit does not see the total.
func zstdOf(t *testing.T, n int) string {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	frame := enc.EncodeAll(make([]byte, 512<<10), nil)
	var out []byte
	for written := 0; written < n; written += 512 << 10 {
		if n-written < 512<<10 {
			frame = enc.EncodeAll(make([]byte, n-written), nil)
		}
		out = append(out, frame...)
	}
	return base64.StdEncoding.EncodeToString(out)
}

// TestZstdTimerPayloadIsDecodedWithinTheLimit: a small zstd payload that
// expands past the 1 MiB timer payload limit is refused (413 too_large)
// after decoding at most the limit, not the whole bomb (the review's 44 KB
// body decoded to 1 GiB).
func TestZstdTimerPayloadIsDecodedWithinTheLimit(t *testing.T) {
	bomb := zstdOf(t, 64<<20)
	before := totalAlloc()
	_, err := timerPayload(&timerOpRequest{Payload: bomb, PayloadZstd: true})
	grew := totalAlloc() - before
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusRequestEntityTooLarge || ae.code != "too_large" {
		t.Fatalf("a %d KB payload expanding to 64 MiB: %v, want 413 too_large", len(bomb)>>10, err)
	}
	if grew > 8<<20 {
		t.Fatalf("decoding the refused payload allocated %d MiB", grew>>20)
	}
	// Exactly the limit still decodes.
	b, err := timerPayload(&timerOpRequest{Payload: zstdOf(t, wire.MaxTimerPayloadBytes), PayloadZstd: true})
	if err != nil || len(b) != wire.MaxTimerPayloadBytes {
		t.Fatalf("a payload of exactly the limit: %d bytes, %v", len(b), err)
	}
}

// TestZstdBombOverHTTP: the timers route and a transaction's timers answer
// the bomb 413 too_large and schedule nothing.
func TestZstdBombOverHTTP(t *testing.T) {
	n := startNode(t)
	op := `{"op":"schedule","queue":"q","timerKey":"k","delayMs":60000,"payloadZstd":true,"payload":"` + zstdOf(t, 16<<20) + `"}`
	for path, body := range map[string]string{
		"/api/v1/timers":      `{"operations":[` + op + `]}`,
		"/api/v1/transaction": `{"operations":[],"timers":[` + op + `]}`,
	} {
		code, ans := call(t, "POST", n.url+path, "", body)
		if !strings.Contains(ans, "too_large") || (path == "/api/v1/timers" && code != http.StatusRequestEntityTooLarge) {
			t.Errorf("%s: %d %s", path, code, ans)
		}
	}
	if code, ans := call(t, "GET", n.url+"/api/v1/timers/q/k", "", ""); code != http.StatusNotFound {
		t.Fatalf("the refused timer exists: %d %s", code, ans)
	}
	// Payloads each within the limit may not together decode to more than
	// the request body cap (1 MiB here).
	var ops []string
	for _, key := range []string{"a", "b"} {
		ops = append(ops, `{"op":"schedule","queue":"q","timerKey":"`+key+`","delayMs":60000,"payloadZstd":true,"payload":"`+zstdOf(t, 600<<10)+`"}`)
	}
	if code, ans := call(t, "POST", n.url+"/api/v1/timers", "", `{"operations":[`+strings.Join(ops, ",")+`]}`); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("two payloads decoding to 1.2 MiB together: %d %s", code, ans)
	}
}
