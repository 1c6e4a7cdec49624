package storage

import (
	"encoding/binary"

	"github.com/queen-mq/queen/wire"
)

// The key space of one group's store. Every key starts with a one-byte tag;
// ids are fixed-width big-endian so keys of one partition sort by offset.
const (
	tagApplied   = 'a' // raft index of the last applied entry
	tagClock     = 'k' // the replicated clock (unix ms)
	tagCounters  = 'n' // id counters
	tagQueue     = 'q' // qid → queue meta
	tagDir       = 'd' // qid, index → directory entry (home groups, placement.go)
	tagPartition = 'p' // pid → partition meta
	tagChunk     = 'm' // pid, base offset → chunk index entry (chunks.go)
	tagTxn       = 't' // pid, kind, transaction id → offset, append time
	tagCursor    = 'c' // pid, group → consumer cursor
	tagSub       = 's' // qid, group → subscription
	tagLease     = 'L' // earlier builds: lease id → pid, group; never read, removed at open (store.go)
	tagDLQ       = 'D' // tenant, dlq id → dead-lettered message
	tagKV        = 'v' // tenant, namespace, 0, key → version, expiry, value
	tagKVTTL     = 'V' // expiry ms, tenant, namespace, 0, key → (empty)
	tagTimer     = 'T' // tenant, queue, 0, timer key → timer
	tagTimerDue  = 'U' // due ms, tenant, queue, 0, timer key → (empty)
	tagTimerGone = 'O' // tombstone end ms, tenant, queue, 0, timer key → (empty)
	tagTrace     = 'X' // tenant, partition id, transaction id, 0, seq → trace event
	tagTraceName = 'Y' // tenant, name, 0, created ms, seq → partition id, transaction id
	tagTraceAge  = 'Z' // created ms, seq → the event's key (retention)
	tagSweep     = 'w' // sweeper name → where its pass stands (sweep.go)
	tagTxnDone   = 'x' // transaction id (UUIDv7, so time-ordered) → its committed result
	tagKafka     = 'K' // Kafka facade bookkeeping; the next byte says what (kafka_state.go)
	tagXStage    = 'Q' // xid, piece → a staged piece of a Kafka transaction (apply_kafka_txn.go)
	tagReply     = 'r' // proposal stamp ms, proposal id, command index → the reply its retries get (retries.go)
	tagRetried   = 'R' // proposal stamp ms, proposal id → (empty): a retry of it was applied (retries.go)
	tagFormat    = 'F' // the store's on-disk format (store.go)
	tagGone      = 'G' // qid, index → 1 until the home dropped it, else 0: a partition removed as idle (cleanup.go)
	tagMove      = 'M' // kind, qid, index → a partition move's record, incoming or moved-out partition (move.go)
)

// Transaction index kinds: a message is addressed either by the raw bytes of
// its message id or by the explicit id its producer gave.
const (
	txnByMsgID    = 0
	txnByExplicit = 1
)

var (
	keyFormat   = []byte{tagFormat}
	keyApplied  = []byte{tagApplied}
	keyClock    = []byte{tagClock}
	keyCounters = []byte{tagCounters}
	// keyKVVersion holds the last KV version handed out: one counter for
	// the group, so a key's versions only ever grow, across deletes too.
	keyKVVersion = []byte{tagCounters, 'v'}
	// keyTraceSeq holds the last trace event sequence number.
	keyTraceSeq = []byte{tagCounters, 't'}
)

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func queueKey(qid uint64) []byte { return appendU64([]byte{tagQueue}, qid) }

func partitionKey(pid uint64) []byte { return appendU64([]byte{tagPartition}, pid) }

func chunkKey(pid, base uint64) []byte {
	b := make([]byte, 0, 17)
	b = append(b, tagChunk)
	b = appendU64(b, pid)
	return appendU64(b, base)
}

// chunkPrefix bounds the chunks of one partition: [chunkPrefix(pid), chunkPrefix(pid+1)).
func chunkPrefix(pid uint64) []byte { return appendU64([]byte{tagChunk}, pid) }

func txnKey(pid uint64, explicit bool, id []byte) []byte {
	b := make([]byte, 0, 10+len(id))
	b = append(b, tagTxn)
	b = appendU64(b, pid)
	if explicit {
		b = append(b, txnByExplicit)
	} else {
		b = append(b, txnByMsgID)
	}
	return append(b, id...)
}

func txnPrefix(pid uint64) []byte { return appendU64([]byte{tagTxn}, pid) }

func cursorKey(pid uint64, group string) []byte {
	b := appendU64([]byte{tagCursor}, pid)
	return append(b, group...)
}

func cursorPrefix(pid uint64) []byte { return appendU64([]byte{tagCursor}, pid) }

func subKey(qid uint64, group string) []byte {
	b := appendU64([]byte{tagSub}, qid)
	return append(b, group...)
}

func subPrefix(qid uint64) []byte { return appendU64([]byte{tagSub}, qid) }

func dlqKey(tenant wire.ID, id uint64) []byte {
	b := append([]byte{tagDLQ}, tenant[:]...)
	return appendU64(b, id)
}

func sweepKey(name string) []byte { return append([]byte{tagSweep}, name...) }

func txnDoneKey(id wire.ID) []byte { return append([]byte{tagTxnDone}, id[:]...) }

// prefixEnd is the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// nsKey joins a tenant, a namespace-like name and a key: names never hold a
// zero byte, so the separator keeps (ns, key) pairs from colliding.
func nsKey(tag byte, tenant wire.ID, ns string, key []byte) []byte {
	b := make([]byte, 0, 18+len(ns)+len(key))
	b = append(b, tag)
	b = append(b, tenant[:]...)
	b = append(b, ns...)
	b = append(b, 0)
	return append(b, key...)
}

func kvKey(tenant wire.ID, ns string, key []byte) []byte { return nsKey(tagKV, tenant, ns, key) }

// kvTTLKey orders expiring keys by expiry for the sweeper.
func kvTTLKey(expiresMs int64, tenant wire.ID, ns string, key []byte) []byte {
	b := appendU64([]byte{tagKVTTL}, uint64(expiresMs))
	return append(b, kvKey(tenant, ns, key)[1:]...)
}
