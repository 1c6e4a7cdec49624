package raftgroups

import (
	"context"
	"fmt"
	"slices"

	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Encryption at rest (spec §5.3, docs/security.md): every write path (push,
// transaction, Kafka produce, timers, acks that carry an error, traces)
// seals what belongs to an encrypted queue before proposing, so the apply
// loop never does crypto and no plaintext of it reaches the raft log or the
// store. A record is sealed whole (SealRecord): key, headers, timestamp,
// trace id, producer subject and payload in one envelope. The state machine
// refuses unsealed records for a queue its options say is encrypted
// (wire.CodeSealRequired): Push then seals and retries. Readers open with
// OpenRecord and OpenText.

// SetPayloadKey installs the QUEEN_ENCRYPTION_KEY; an invalid key (the
// zero Key) leaves encryption off. Call it before serving.
func (e *Engine) SetPayloadKey(k envelope.Key) {
	if k.Valid() {
		e.payloadKey = &k
	}
}

// EncryptionEnabled reports whether a key is installed.
func (e *Engine) EncryptionEnabled() bool { return e.payloadKey != nil }

// PushFlags are the push command flags a proposal from this node carries:
// PushKeyHeld when it holds the key, so the state machine enforces sealing.
func (e *Engine) PushFlags() uint8 {
	if e.payloadKey != nil {
		return wire.PushKeyHeld
	}
	return 0
}

// QueueEncrypted reports whether records pushed to tenant's queue are
// sealed: the queue asks for it and a key is installed. A queue that does
// not exist yet is created unencrypted by its first push.
func (e *Engine) QueueEncrypted(tenant wire.ID, queue string) bool {
	if e.payloadKey == nil {
		return false
	}
	cat, ok := e.Catalog(tenant, queue)
	return ok && cat.Cfg.EncryptionEnabled
}

// QueueEncryptedNow is QueueEncrypted read once this node's replica of the
// home has caught up, when it says no: what is stored without passing the
// state machine's check (a timer's payload) must not miss a configure made
// through another node a moment ago. A catch-up that fails leaves the
// answer to this node's replica.
func (e *Engine) QueueEncryptedNow(ctx context.Context, tenant wire.ID, queue string) bool {
	if e.payloadKey == nil || e.QueueEncrypted(tenant, queue) {
		return e.payloadKey != nil
	}
	ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
	defer cancel()
	return e.CatchUpQueues(ctx, tenant, queue) == nil && e.QueueEncrypted(tenant, queue)
}

// QueueEncryptedIn is QueueEncrypted also asking group's copy of the
// queue's options: the group a write goes to may have applied a configure
// this node's replica of the home has not yet (it refused an unsealed write
// for it), and its copy is the one the state machine checks.
func (e *Engine) QueueEncryptedIn(tenant wire.ID, queue string, group int) bool {
	if e.payloadKey == nil {
		return false
	}
	return e.QueueEncrypted(tenant, queue) || e.encryptedInGroup(tenant, queue, group)
}

// encryptedInGroup reports whether group's own copy of the queue's options
// asks for encryption (see QueueEncryptedIn).
func (e *Engine) encryptedInGroup(tenant wire.ID, queue string, group int) bool {
	if group < 0 || group >= len(e.host.groups) {
		return false
	}
	cat, _, ok := e.GroupStore(group).Catalog(tenant, queue)
	return ok && cat.Cfg.EncryptionEnabled
}

// partitionEncrypted reports whether the partition pid (of tenant) belongs
// to an encrypted queue, in the view of the group holding it.
func (e *Engine) partitionEncrypted(tenant wire.ID, pid uint64) bool {
	if e.payloadKey == nil {
		return false
	}
	p, ok := e.PartitionByID(tenant, pid)
	return ok && e.QueueEncryptedIn(tenant, p.Queue, wire.GroupOfID(pid))
}

// SealRecord turns a plaintext record into its stored form in an encrypted
// queue: only the message id and transaction id stay in clear (the state
// machine deduplicates and acknowledges by them), everything else is in one
// envelope in Payload. A record already sealed is left as it is.
func (e *Engine) SealRecord(rec *wire.Record) error {
	if e.payloadKey == nil {
		return fmt.Errorf("raftgroups: seal record: %w", envelope.ErrNoKey)
	}
	if rec.Flags&wire.FlagEncrypted != 0 {
		return nil
	}
	plain := wire.AppendSealedFields(make([]byte, 0, wire.SealedFieldsLen(rec)), rec)
	sealed, err := e.payloadKey.Seal(plain)
	if err != nil {
		return fmt.Errorf("raftgroups: seal record: %w", err)
	}
	*rec = wire.Record{Flags: rec.Flags&wire.FlagTxnID | wire.FlagEncrypted | wire.FlagSealed,
		MsgID: rec.MsgID, TxnID: rec.TxnID, Payload: sealed}
	return nil
}

// OpenRecord replaces an encrypted record by its plaintext: every sealed
// field for records sealed whole, the payload for records written when only
// payloads were sealed. A record that does not open (the key changed or is
// unset) is left as stored, its payload the ciphertext envelope, which is
// what the spec says readers get.
func (e *Engine) OpenRecord(rec *wire.Record) {
	if rec.Flags&wire.FlagEncrypted == 0 || e.payloadKey == nil {
		return
	}
	plain, ok := e.payloadKey.Open(rec.Payload)
	if !ok {
		return
	}
	if rec.Flags&wire.FlagSealed == 0 {
		rec.Payload = plain
		rec.Flags &^= wire.FlagEncrypted
		return
	}
	// Authenticated but not decodable: ParseSealedFields leaves rec as
	// stored, and it is served so.
	_ = wire.ParseSealedFields(plain, rec)
}

// SealText seals a short text of an encrypted queue (an ack's error, a
// trace's data) as an envelope; OpenText recognises it by its shape.
func (e *Engine) SealText(text []byte) ([]byte, error) {
	sealed, err := e.payloadKey.Seal(text)
	if err != nil {
		return nil, fmt.Errorf("raftgroups: seal: %w", err)
	}
	return sealed, nil
}

// OpenText is the plaintext of a text SealText sealed, or the text as it is
// when it is not an envelope or does not open with this node's key.
func (e *Engine) OpenText(text []byte) []byte {
	if e.payloadKey == nil || !envelope.IsEnvelope(text) {
		return text
	}
	if plain, ok := e.payloadKey.Open(text); ok {
		return plain
	}
	return text
}

// sealPushRecords re-encodes a push command's records sealed: callers of
// Push and Transaction hand records in clear, and the engine seals those of
// encrypted queues. Records sealed already are kept as they are.
func (e *Engine) sealPushRecords(c *wire.PushCmd) error {
	out := make([]byte, 0, envelope.SealedLen(len(c.Records))+c.Count*(envelope.SealedLen(0)+32))
	it := wire.NewRecordIter(c.Records)
	for {
		body, _, ok := it.Next()
		if !ok {
			break
		}
		rec, err := wire.ParseRecord(body)
		if err != nil {
			return fmt.Errorf("raftgroups: seal push: %w", err)
		}
		if err := e.SealRecord(&rec); err != nil {
			return err
		}
		out = wire.AppendRecord(out, &rec)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("raftgroups: seal push: %w", err)
	}
	c.Records = out
	return nil
}

// sealAckErrors seals the error texts of ack items whose partition belongs
// to an encrypted queue: they are kept with the lease, as the cursor's last
// error and in the DLQ row. The caller's items are not changed: when one
// needed sealing, a sealed copy is returned and changed is true.
func (e *Engine) sealAckErrors(tenant wire.ID, items []wire.AckItem) (out []wire.AckItem, changed bool, err error) {
	out = items
	for i := range items {
		it := &items[i]
		if it.Error == "" || !e.partitionEncrypted(tenant, it.PartitionID) {
			continue
		}
		sealed, err := e.SealText([]byte(it.Error))
		if err != nil {
			return nil, false, err
		}
		if !changed {
			out, changed = slices.Clone(items), true
		}
		out[i].Error = string(sealed)
	}
	return out, changed, nil
}

// openDLQRows opens the rows' error texts (sealed by sealAckErrors).
func (e *Engine) openDLQRows(rows []storage.DLQRow) {
	if e.payloadKey == nil {
		return
	}
	for i := range rows {
		rows[i].Error = string(e.OpenText([]byte(rows[i].Error)))
	}
}

// openTraces opens the events' data (sealed by Trace).
func (e *Engine) openTraces(evs []storage.TraceEvent) {
	if e.payloadKey == nil {
		return
	}
	for i := range evs {
		evs[i].Data = e.OpenText(evs[i].Data)
	}
}
