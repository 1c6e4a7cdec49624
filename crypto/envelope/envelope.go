// Package envelope implements queen's payload encryption at rest (spec §5.3):
// AES-256-GCM, each payload stored as the JSON envelope
//
//	{"encrypted":"<base64 ciphertext>","iv":"<base64 16 bytes>","authTag":"<base64 16 bytes>"}
//
// where the first 12 bytes of iv are the GCM nonce.
//
// The package owns the key format (ParseKey), the envelope's wire shape, sealing
// and opening. It never reads the environment, never logs, and never decides
// which queues are encrypted: the binary parses QUEEN_ENCRYPTION_KEY once at boot,
// logs DisabledWarning when ParseKey fails, and hands the Key to the code paths
// that push to and pop from queues with encryptionEnabled.
//
// Reads recognise the envelope by its shape. When the key cannot decrypt an
// envelope (the key was changed), Open reports ok=false and the caller serves the
// stored bytes unchanged, as the spec requires; restoring the key restores the
// plaintext.
package envelope

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// DisabledWarning is the warning the spec (§5.3) asks the binary to log when
// QUEEN_ENCRYPTION_KEY is set but ParseKey rejects it.
const DisabledWarning = "QUEEN_ENCRYPTION_KEY must be 64 hex chars; encryption DISABLED"

const (
	keyHexLen = 64 // hex characters in QUEEN_ENCRYPTION_KEY
	keyLen    = 32 // AES-256
	ivLen     = 16 // stored iv length
	nonceLen  = 12 // GCM nonce: the first nonceLen bytes of iv
	tagLen    = 16 // GCM tag
)

// Errors. ParseKey's errors wrap ErrInvalidKey and one of ErrKeyLength or
// ErrKeyNotHex; they never contain the key. AppendOpen's errors wrap
// ErrNotEnvelope or ErrDecrypt.
var (
	ErrInvalidKey  = errors.New("envelope: invalid encryption key")
	ErrKeyLength   = fmt.Errorf("%w: must be %d hex chars", ErrInvalidKey, keyHexLen)
	ErrKeyNotHex   = fmt.Errorf("%w: not hexadecimal", ErrInvalidKey)
	ErrNoKey       = errors.New("envelope: no encryption key")
	ErrNotEnvelope = errors.New("envelope: not an encrypted envelope")
	ErrDecrypt     = errors.New("envelope: cannot decrypt (wrong key or altered data)")
)

// Key is a parsed encryption key ready to seal and open envelopes. The zero Key
// is "no key": Seal fails with ErrNoKey and Open reports ok=false. A Key is safe
// for concurrent use and cheap to copy. It never prints its bytes.
type Key struct {
	aead cipher.AEAD
}

// ParseKey parses QUEEN_ENCRYPTION_KEY: exactly 64 hexadecimal characters
// (either case), giving 32 bytes. Surrounding whitespace is not trimmed.
func ParseKey(s string) (Key, error) {
	if len(s) != keyHexLen {
		return Key{}, fmt.Errorf("%w (got %d chars)", ErrKeyLength, len(s))
	}
	var raw [keyLen]byte
	if _, err := hex.Decode(raw[:], []byte(s)); err != nil {
		// err from encoding/hex names the offending byte; keep the secret out of
		// logs and report only that it is not hex.
		return Key{}, ErrKeyNotHex
	}
	k, err := newKey(raw[:])
	clear(raw[:])
	return k, err
}

func newKey(raw []byte) (Key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return Key{}, fmt.Errorf("envelope: aes: %w", err)
	}
	aead, err := cipher.NewGCM(block) // 12-byte nonce, 16-byte tag
	if err != nil {
		return Key{}, fmt.Errorf("envelope: gcm: %w", err)
	}
	return Key{aead: aead}, nil
}

// Valid reports whether k holds a key (false for the zero Key).
func (k Key) Valid() bool { return k.aead != nil }

// String describes the key without revealing it.
func (k Key) String() string {
	if k.aead == nil {
		return "envelope.Key(<unset>)"
	}
	return "envelope.Key(AES-256-GCM)"
}

// GoString keeps %#v from printing the cipher's internal state.
func (k Key) GoString() string { return k.String() }

// SealedLen is the exact length of the envelope Seal produces for a plaintext
// of n bytes.
func SealedLen(n int) int {
	return len(prefixEncrypted) + base64.StdEncoding.EncodedLen(n) +
		len(midIV) + base64.StdEncoding.EncodedLen(ivLen) +
		len(midTag) + base64.StdEncoding.EncodedLen(tagLen) + len(suffix)
}

const (
	prefixEncrypted = `{"encrypted":"`
	midIV           = `","iv":"`
	midTag          = `","authTag":"`
	suffix          = `"}`
)

// Seal encrypts plaintext under a fresh random nonce and returns the envelope.
func (k Key) Seal(plaintext []byte) ([]byte, error) {
	return k.AppendSeal(make([]byte, 0, SealedLen(len(plaintext))), plaintext)
}

// maxPooled bounds the scratch buffers kept for reuse, so one huge payload does
// not pin its size in the pool.
const maxPooled = 256 << 10

// work is per-call scratch space. The nonce and tag live here rather than on
// the stack because passing them to the cipher.AEAD interface makes them
// escape, which would cost an allocation per call.
type work struct {
	buf []byte
	iv  [smallMax]byte
	tag [smallMax]byte
}

var pool = sync.Pool{New: func() any { return &work{buf: make([]byte, 0, 4096)} }}

func getWork() *work { return pool.Get().(*work) }

func putWork(w *work) {
	if cap(w.buf) > maxPooled {
		w.buf = nil
	}
	pool.Put(w)
}

// AppendSeal is Seal appending the envelope to dst. On error dst is returned
// unchanged. With dst of sufficient capacity (see SealedLen) and payloads up to
// 256 KiB it does not allocate in the steady state.
func (k Key) AppendSeal(dst, plaintext []byte) ([]byte, error) {
	if k.aead == nil {
		return dst, ErrNoKey
	}
	w := getWork()
	defer putWork(w)
	iv := w.iv[:ivLen]
	if _, err := rand.Read(iv); err != nil {
		return dst, fmt.Errorf("envelope: nonce: %w", err)
	}
	sealed := k.aead.Seal(w.buf[:0], iv[:nonceLen], plaintext, nil)
	w.buf = sealed[:0]
	ct, tag := sealed[:len(plaintext)], sealed[len(plaintext):]

	dst = slices.Grow(dst, SealedLen(len(plaintext)))
	dst = append(dst, prefixEncrypted...)
	dst = base64.StdEncoding.AppendEncode(dst, ct)
	dst = append(dst, midIV...)
	dst = base64.StdEncoding.AppendEncode(dst, iv)
	dst = append(dst, midTag...)
	dst = base64.StdEncoding.AppendEncode(dst, tag)
	dst = append(dst, suffix...)
	return dst, nil
}

// Open decrypts an envelope. ok is false when stored is not an envelope, when k
// is the zero Key, or when the key does not decrypt it (key changed, data
// altered); the caller then serves stored as it is.
func (k Key) Open(stored []byte) (plaintext []byte, ok bool) {
	out, err := k.AppendOpen(nil, stored)
	if err != nil {
		return nil, false
	}
	if out == nil {
		out = []byte{} // an empty plaintext is still a successful open
	}
	return out, true
}

// AppendOpen is Open appending the plaintext to dst and saying why it failed:
// the error wraps ErrNoKey, ErrNotEnvelope or ErrDecrypt. On error dst is
// returned with its original length. It decrypts in place in dst's spare
// capacity and does not allocate when that capacity suffices.
func (k Key) AppendOpen(dst, stored []byte) ([]byte, error) {
	if k.aead == nil {
		return dst, ErrNoKey
	}
	f, ok := parse(stored)
	if !ok {
		return dst, ErrNotEnvelope
	}
	w := getWork()
	defer putWork(w)
	if n, ok := decodeSmall(&w.iv, f.iv); !ok || n < nonceLen || n > ivLen {
		return dst, fmt.Errorf("%w: bad iv", ErrNotEnvelope)
	}
	if n, ok := decodeSmall(&w.tag, f.tag); !ok || n != tagLen {
		return dst, fmt.Errorf("%w: bad authTag", ErrNotEnvelope)
	}
	n := len(dst)
	maxCT := base64.StdEncoding.DecodedLen(len(f.enc))
	dst = slices.Grow(dst, maxCT+tagLen)
	buf := dst[n : n+maxCT+tagLen]
	ctN, err := base64.StdEncoding.Decode(buf, f.enc)
	if err != nil {
		return dst[:n], fmt.Errorf("%w: bad ciphertext encoding", ErrNotEnvelope)
	}
	copy(buf[ctN:], w.tag[:tagLen])
	pt, err := k.aead.Open(buf[:0], w.iv[:nonceLen], buf[:ctN+tagLen], nil)
	if err != nil {
		return dst[:n], ErrDecrypt
	}
	return dst[:n+len(pt)], nil
}

// IsEnvelope reports whether b has the envelope's shape: a JSON object with
// exactly the string members "encrypted", "iv" and "authTag" (any order), whose
// iv decodes to 12 to 16 bytes, authTag to 16 bytes and encrypted to valid
// base64. It does not need the key and does not allocate for envelopes written
// by Seal.
func IsEnvelope(b []byte) bool {
	f, ok := parse(b)
	if !ok {
		return false
	}
	var small [smallMax]byte
	if n, ok := decodeSmall(&small, f.iv); !ok || n < nonceLen || n > ivLen {
		return false
	}
	if n, ok := decodeSmall(&small, f.tag); !ok || n != tagLen {
		return false
	}
	return validBase64(f.enc)
}

// smallMax holds the decoding of any base64 text of at most 24 characters,
// which covers a 16-byte iv or tag.
const smallMax = 18

// decodeSmall decodes a short base64 value (iv, authTag); longer text fails.
func decodeSmall(dst *[smallMax]byte, text []byte) (int, bool) {
	if base64.StdEncoding.DecodedLen(len(text)) > len(dst) {
		return 0, false
	}
	n, err := base64.StdEncoding.Decode(dst[:], text)
	return n, err == nil
}

// validBase64 checks text is padded standard base64 without decoding it into
// memory: decode it in small chunks into a stack buffer.
func validBase64(text []byte) bool {
	if len(text)%4 != 0 {
		return false
	}
	var buf [96]byte
	for len(text) > 0 {
		chunk := min(len(text), 128) // 128 chars -> at most 96 bytes
		if chunk < len(text) && hasPad(text[:chunk]) {
			return false // padding only at the very end
		}
		if _, err := base64.StdEncoding.Decode(buf[:], text[:chunk]); err != nil {
			return false
		}
		text = text[chunk:]
	}
	return true
}

func hasPad(b []byte) bool { return slices.Contains(b, '=') }
