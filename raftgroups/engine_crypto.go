package raftgroups

import (
	"fmt"

	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/wire"
)

// Payload encryption at rest (spec §5.3): every write path (push,
// transaction, Kafka produce, timers) seals a payload with SealPayload
// before proposing when its queue has encryptionEnabled, so the apply loop
// never does crypto and no plaintext reaches the raft log or the store.
// Readers open with OpenPayload.

// SetPayloadKey installs the QUEEN_ENCRYPTION_KEY; an invalid key (the
// zero Key) leaves encryption off. Call it before serving.
func (e *Engine) SetPayloadKey(k envelope.Key) {
	if k.Valid() {
		e.payloadKey = &k
	}
}

// EncryptionEnabled reports whether a key is installed.
func (e *Engine) EncryptionEnabled() bool { return e.payloadKey != nil }

// QueueEncrypted reports whether payloads pushed to tenant's queue are
// sealed: the queue asks for it and a key is installed. A queue that does
// not exist yet is created unencrypted by its first push.
func (e *Engine) QueueEncrypted(tenant wire.ID, queue string) bool {
	if e.payloadKey == nil {
		return false
	}
	cat, ok := e.Catalog(tenant, queue)
	return ok && cat.Cfg.EncryptionEnabled
}

// SealPayload returns a payload as stored in an encrypted queue and the
// record flag that marks it.
func (e *Engine) SealPayload(payload []byte) ([]byte, uint64, error) {
	sealed, err := e.payloadKey.Seal(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("raftgroups: seal payload: %w", err)
	}
	return sealed, wire.FlagEncrypted, nil
}

// OpenPayload replaces an encrypted record's payload by its plaintext. A
// payload that no longer opens (the key changed or is unset) is left as the
// ciphertext envelope, which is what the spec says readers get.
func (e *Engine) OpenPayload(rec *wire.Record) {
	if rec.Flags&wire.FlagEncrypted == 0 || e.payloadKey == nil {
		return
	}
	if plain, ok := e.payloadKey.Open(rec.Payload); ok {
		rec.Payload = plain
		rec.Flags &^= wire.FlagEncrypted
	}
}
