package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const (
	hexKeyA = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	hexKeyB = "FFEEDDCCBBAA99887766554433221100ffeeddccbbaa99887766554433221100"
)

func mustKey(t testing.TB, s string) Key {
	t.Helper()
	k, err := ParseKey(s)
	if err != nil {
		t.Fatalf("ParseKey: %v", err)
	}
	return k
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"lower", hexKeyA, nil},
		{"upper and mixed", hexKeyB, nil},
		{"empty", "", ErrKeyLength},
		{"short", hexKeyA[:62], ErrKeyLength},
		{"long", hexKeyA + "00", ErrKeyLength},
		{"trailing newline", hexKeyA[:63] + "\n", ErrKeyNotHex},
		{"padded", " " + hexKeyA, ErrKeyLength},
		{"not hex", "zz" + hexKeyA[2:], ErrKeyNotHex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKey(tc.in)
			if tc.want == nil {
				if err != nil || !k.Valid() {
					t.Fatalf("ParseKey = %v, %v; want a valid key", k, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ParseKey err = %v; want %v wrapping ErrInvalidKey", err, tc.want)
			}
			if k.Valid() {
				t.Fatal("invalid input gave a valid key")
			}
			if len(tc.in) > 8 && strings.Contains(err.Error(), tc.in[2:10]) {
				t.Fatalf("error %q leaks the key", err)
			}
		})
	}
}

func TestKeyDoesNotPrintItself(t *testing.T) {
	k := mustKey(t, hexKeyA)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(strings.ToLower(s), "0102030405") {
			t.Fatalf("key printed: %s", s)
		}
	}
	if got := (Key{}).String(); got != "envelope.Key(<unset>)" {
		t.Fatalf("zero Key String = %q", got)
	}
}

func TestRoundTrip(t *testing.T) {
	k := mustKey(t, hexKeyA)
	for _, pt := range [][]byte{
		nil,
		{},
		[]byte(`{"orderId":123,"items":["a","b"]}`),
		[]byte("plain text with \"quotes\" and \\ backslashes\n"),
		bytes.Repeat([]byte{0, 1, 2, 0xff}, 100000), // above the pool cap
	} {
		sealed, err := k.Seal(pt)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != SealedLen(len(pt)) {
			t.Fatalf("len(sealed) = %d, SealedLen = %d", len(sealed), SealedLen(len(pt)))
		}
		if !IsEnvelope(sealed) {
			t.Fatalf("IsEnvelope(Seal(...)) = false: %.200s", sealed)
		}
		got, ok := k.Open(sealed)
		if !ok || !bytes.Equal(got, pt) || got == nil {
			t.Fatalf("Open = %.40q, %v; want %.40q, true (non-nil)", got, ok, pt)
		}
	}
}

func TestSealShape(t *testing.T) {
	k := mustKey(t, hexKeyA)
	pt := []byte("hello, queen")
	sealed, err := k.Seal(pt)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal(sealed, &env); err != nil {
		t.Fatalf("envelope is not JSON: %v", err)
	}
	if len(env) != 3 {
		t.Fatalf("envelope members = %v", env)
	}
	lens := map[string]int{"encrypted": len(pt), "iv": 16, "authTag": 16}
	for name, want := range lens {
		raw, err := base64.StdEncoding.DecodeString(env[name])
		if err != nil || len(raw) != want {
			t.Fatalf("%s: %d bytes, err %v; want %d", name, len(raw), err, want)
		}
	}
	// Fresh nonce per seal: the same plaintext never gives the same envelope.
	again, _ := k.Seal(pt)
	if bytes.Equal(sealed, again) {
		t.Fatal("two seals of one plaintext are identical: nonce reused")
	}
}

func TestWrongKeyAndNoKey(t *testing.T) {
	sealed, err := mustKey(t, hexKeyA).Seal([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	b := mustKey(t, hexKeyB)
	if got, ok := b.Open(sealed); ok || got != nil {
		t.Fatalf("wrong key: Open = %q, %v", got, ok)
	}
	if _, err := b.AppendOpen(nil, sealed); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong key: err = %v, want ErrDecrypt", err)
	}
	if _, ok := (Key{}).Open(sealed); ok {
		t.Fatal("zero Key opened an envelope")
	}
	if _, err := (Key{}).Seal([]byte("x")); !errors.Is(err, ErrNoKey) {
		t.Fatalf("zero Key Seal err = %v", err)
	}
	// Restoring the key restores the plaintext.
	if got, ok := mustKey(t, hexKeyA).Open(sealed); !ok || string(got) != "secret" {
		t.Fatalf("original key: %q, %v", got, ok)
	}
}

// rebuild re-encodes an envelope with one member changed by fn.
func rebuild(t *testing.T, sealed []byte, member string, fn func([]byte) []byte) []byte {
	t.Helper()
	var env map[string]string
	if err := json.Unmarshal(sealed, &env); err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(env[member])
	env[member] = base64.StdEncoding.EncodeToString(fn(raw))
	out, _ := json.Marshal(env)
	return out
}

func TestTamperDetection(t *testing.T) {
	k := mustKey(t, hexKeyA)
	sealed, err := k.Seal([]byte(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) func([]byte) []byte {
		return func(b []byte) []byte { b[i] ^= 0x01; return b }
	}
	for _, tc := range []struct {
		name, member string
		fn           func([]byte) []byte
	}{
		{"ciphertext bit", "encrypted", flip(3)},
		{"ciphertext truncated", "encrypted", func(b []byte) []byte { return b[:len(b)-1] }},
		{"ciphertext extended", "encrypted", func(b []byte) []byte { return append(b, 0) }},
		{"tag bit", "authTag", flip(15)},
		{"nonce bit", "iv", flip(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := rebuild(t, sealed, tc.member, tc.fn)
			if !IsEnvelope(bad) {
				t.Fatal("tampered envelope no longer has the envelope shape")
			}
			if _, err := k.AppendOpen(nil, bad); !errors.Is(err, ErrDecrypt) {
				t.Fatalf("err = %v, want ErrDecrypt", err)
			}
		})
	}
	// Only the first 12 iv bytes are the nonce: the last 4 are not authenticated
	// (as in Queen's format), so altering them still opens.
	tail := rebuild(t, sealed, "iv", flip(15))
	if _, ok := k.Open(tail); !ok {
		t.Fatal("iv bytes 12..15 should not take part in decryption")
	}
}

func TestNotEnvelope(t *testing.T) {
	k := mustKey(t, hexKeyA)
	good, _ := k.Seal([]byte("x"))
	var env map[string]string
	_ = json.Unmarshal(good, &env)
	enc, iv, tag := env["encrypted"], env["iv"], env["authTag"]
	mk := func(s string) []byte {
		r := strings.NewReplacer("ENC", enc, "IV", iv, "TAG", tag)
		return []byte(r.Replace(s))
	}
	for _, in := range []string{
		``, `null`, `"x"`, `{}`, `[]`, `{"a":1}`, `plain text`,
		`{"encrypted":"ENC","iv":"IV"}`,
		`{"encrypted":"ENC","iv":"IV","authTag":"TAG","extra":"x"}`,
		`{"encrypted":"ENC","iv":"IV","authTag":"TAG","iv":"IV"}`,
		`{"encrypted":"ENC","iv":"IV","authTag":"TAG"} x`,
		`{"encrypted":"ENC","iv":"IV","authTag":"TAG"}{}`,
		`{"encrypted":"ENC","iv":"IV","authTag":5}`,
		`{"encrypted":"ENC","iv":"IV","authTag":"TAG",}`,
		`{"Encrypted":"ENC","iv":"IV","authTag":"TAG"}`,
		`{"encrypted":"ENC","iv":"AAAA","authTag":"TAG"}`,             // iv too short
		`{"encrypted":"ENC","iv":"IV","authTag":"AAAA"}`,              // tag too short
		`{"encrypted":"EN*C","iv":"IV","authTag":"TAG"}`,              // not base64
		`{"encrypted":"ENC","iv":"IV","authTag":"TAG"`,                // unterminated
		"{\"encrypted\":\"ENC\n\",\"iv\":\"IV\",\"authTag\":\"TAG\"}", // raw control char
		`{"encrypted":"ENC\n","iv":"IV","authTag":"TAG"}`,             // escaped control char
	} {
		b := mk(in)
		if IsEnvelope(b) {
			t.Errorf("IsEnvelope(%q) = true", b)
		}
		if got, ok := k.Open(b); ok {
			t.Errorf("Open(%q) = %q, true", b, got)
		}
		if _, err := k.AppendOpen(nil, b); !errors.Is(err, ErrNotEnvelope) {
			t.Errorf("AppendOpen(%q) err = %v, want ErrNotEnvelope", b, err)
		}
	}
}

func TestEnvelopeVariantsAccepted(t *testing.T) {
	k := mustKey(t, hexKeyA)
	good, _ := k.Seal([]byte("payload"))
	var env map[string]string
	_ = json.Unmarshal(good, &env)
	enc, iv, tag := env["encrypted"], env["iv"], env["authTag"]
	for _, s := range []string{
		// Member order as PostgreSQL jsonb stores it.
		fmt.Sprintf(`{"iv": "%s", "authTag": "%s", "encrypted": "%s"}`, iv, tag, enc),
		// Pretty-printed with surrounding whitespace.
		fmt.Sprintf("\n {\n\t\"encrypted\" : \"%s\",\r\n \"iv\":\"%s\", \"authTag\":\"%s\" }\n", enc, iv, tag),
		// An encoder that escapes '/' (forces the slow path when present).
		strings.ReplaceAll(fmt.Sprintf(`{"encrypted":"%s","iv":"%s","authTag":"%s"}`, enc, iv, tag), "/", `\/`),
		// A 12-byte iv.
		fmt.Sprintf(`{"encrypted":"%s","iv":"%s","authTag":"%s"}`, enc,
			base64.StdEncoding.EncodeToString(mustB64(t, iv)[:12]), tag),
		// Escaped member name.
		fmt.Sprintf(`{"encrypted":"%s","\u0069v":"%s","authTag":"%s"}`, enc, iv, tag),
	} {
		if !IsEnvelope([]byte(s)) {
			t.Errorf("IsEnvelope(%q) = false", s)
		}
		if got, ok := k.Open([]byte(s)); !ok || string(got) != "payload" {
			t.Errorf("Open(%q) = %q, %v", s, got, ok)
		}
	}
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendVariants(t *testing.T) {
	k := mustKey(t, hexKeyA)
	prefix := []byte("prefix:")
	sealed, err := k.AppendSeal(append([]byte(nil), prefix...), []byte("body"))
	if err != nil || !bytes.HasPrefix(sealed, prefix) {
		t.Fatalf("AppendSeal kept no prefix: %q %v", sealed, err)
	}
	out, err := k.AppendOpen(append([]byte(nil), prefix...), sealed[len(prefix):])
	if err != nil || string(out) != "prefix:body" {
		t.Fatalf("AppendOpen = %q, %v", out, err)
	}
	// Failure leaves dst's length as it was.
	out, err = k.AppendOpen(append([]byte(nil), prefix...), []byte("{}"))
	if err == nil || string(out) != "prefix:" {
		t.Fatalf("failed AppendOpen = %q, %v", out, err)
	}
}

func TestSteadyStateAllocations(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts are not meaningful under -cover or -race")
	}
	k := mustKey(t, hexKeyA)
	pt := bytes.Repeat([]byte("x"), 1024)
	sealBuf := make([]byte, 0, SealedLen(len(pt)))
	sealed, _ := k.AppendSeal(nil, pt)
	openBuf := make([]byte, 0, len(sealed))
	if n := testing.AllocsPerRun(200, func() { _, _ = k.AppendSeal(sealBuf[:0], pt) }); n != 0 {
		t.Errorf("AppendSeal allocs = %v, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = k.AppendOpen(openBuf[:0], sealed) }); n != 0 {
		t.Errorf("AppendOpen allocs = %v, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() { _ = IsEnvelope(sealed) }); n != 0 {
		t.Errorf("IsEnvelope allocs = %v, want 0", n)
	}
}

func BenchmarkSeal1K(b *testing.B) {
	k := mustKey(b, hexKeyA)
	pt := bytes.Repeat([]byte("x"), 1024)
	dst := make([]byte, 0, SealedLen(len(pt)))
	b.SetBytes(int64(len(pt)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = k.AppendSeal(dst[:0], pt)
	}
}

func BenchmarkOpen1K(b *testing.B) {
	k := mustKey(b, hexKeyA)
	pt := bytes.Repeat([]byte("x"), 1024)
	sealed, _ := k.Seal(pt)
	dst := make([]byte, 0, len(sealed))
	b.SetBytes(int64(len(pt)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = k.AppendOpen(dst[:0], sealed)
	}
}
