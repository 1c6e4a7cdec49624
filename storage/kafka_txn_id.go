package storage

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/queen-mq/queen/wire"
)

// KafkaTxnXID names the transaction info describes: the same for every
// piece staged for it, every attempt at ending it and the coordinator's
// record of it ending (txnState.unsettled), which is why the state machine
// computes it too.
func KafkaTxnXID(info TxnInfo) wire.ID {
	h := sha256.New()
	h.Write(info.Tenant[:])
	h.Write([]byte(info.TxnID))
	var b [18]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(info.ProducerID))
	binary.BigEndian.PutUint16(b[8:10], uint16(info.Epoch))
	binary.BigEndian.PutUint64(b[10:18], info.TxnSeq)
	h.Write(b[:])
	var id wire.ID
	copy(id[:], h.Sum(nil))
	// Shaped as a UUIDv7 of when the transaction began, so the
	// participants' remembered outcomes age out with the transaction
	// window like any other.
	for i := 0; i < 6; i++ {
		id[i] = byte(uint64(info.BeganMs) >> (40 - 8*i))
	}
	return id
}
