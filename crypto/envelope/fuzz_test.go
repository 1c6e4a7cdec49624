package envelope

import (
	"bytes"
	"testing"
)

// FuzzOpen checks, for arbitrary stored bytes, that Open and IsEnvelope never
// panic, that the allocation-free parser agrees with encoding/json on what an
// envelope is, and that anything Open accepts re-seals and re-opens to the
// same plaintext. The seed corpus is in testdata/fuzz/FuzzOpen; it includes
// envelopes sealed with hexKeyA, so the decrypting path is explored too.
func FuzzOpen(f *testing.F) {
	k, err := ParseKey(hexKeyA)
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := k.Seal([]byte(`{"hello":"queen"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Fuzz(func(t *testing.T, stored []byte) {
		orig := bytes.Clone(stored)

		fast, fastOK := parse(stored)
		slow, slowOK := parseSlow(stored)
		if fastOK != slowOK {
			t.Fatalf("parse = %v, parseSlow = %v for %q", fastOK, slowOK, stored)
		}
		if fastOK && (!bytes.Equal(fast.enc, slow.enc) || !bytes.Equal(fast.iv, slow.iv) || !bytes.Equal(fast.tag, slow.tag)) {
			t.Fatalf("parse and parseSlow disagree on members of %q", stored)
		}

		isEnv := IsEnvelope(stored)
		pt, ok := k.Open(stored)
		if ok && !isEnv {
			t.Fatalf("Open accepted %q but IsEnvelope rejects it", stored)
		}
		if !bytes.Equal(stored, orig) {
			t.Fatal("Open or IsEnvelope modified its input")
		}
		if !ok {
			if pt != nil {
				t.Fatal("failed Open returned a plaintext")
			}
			return
		}
		again, err := k.Seal(pt)
		if err != nil {
			t.Fatal(err)
		}
		if back, ok := k.Open(again); !ok || !bytes.Equal(back, pt) {
			t.Fatal("re-sealed plaintext does not round-trip")
		}
	})
}
