package broker

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// msgIDs hands out message ids for produced records: UUIDv7 (so they read
// like the ids HTTP pushes get), with the random bits a per-process random
// base plus a counter. A batch reserves its ids with one atomic add instead
// of reading crypto/rand per record; ids stay unique in the process and,
// with 74 random bits of base, across processes.
type msgIDs struct {
	salt uint16 // 12 random bits
	base uint64 // 62 random bits
	n    atomic.Uint64
}

func (g *msgIDs) init() {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	g.salt = binary.BigEndian.Uint16(b[:2]) & 0x0fff
	g.base = binary.BigEndian.Uint64(b[2:])
}

// newReqID is a proposer-chosen request id: what lets a command recognise
// its own retried proposal.
func newReqID() wire.ID {
	var id wire.ID
	_, _ = rand.Read(id[:])
	return id
}

// first reserves n consecutive ids and returns the first; the others
// follow from it (wire.ID.Plus), as the stored records of a batch and a
// batch kept as produced both number them.
func (g *msgIDs) first(n int) wire.ID {
	return g.id(time.Now().UnixMilli(), g.n.Add(uint64(n))-uint64(n))
}

// id builds the id of counter value v at unix millisecond ms.
func (g *msgIDs) id(ms int64, v uint64) wire.ID {
	var id wire.ID
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(ms))
	copy(id[:6], t[2:])
	id[6] = 0x70 | byte(g.salt>>8)
	id[7] = byte(g.salt)
	binary.BigEndian.PutUint64(id[8:], g.base+v)
	id[8] = 0x80 | id[8]&0x3f
	return id
}

// storedSize is an upper bound of a batch's records in stored form, so the
// command buffer is allocated once.
func storedSize(b *records.Batch) int {
	n := 0
	for i := range b.Records {
		r := &b.Records[i]
		n += 48 + len(r.Key) + len(r.Value)
		for _, h := range r.Headers {
			n += 12 + len(h.Key) + len(h.Value)
		}
	}
	return n
}

// storedForm is how a topic stores produced records: sealed (the queue is
// encrypted, spec §5.3) and with the append time as their timestamp
// (message.timestamp.type=LogAppendTime).
type storedForm struct {
	seal       bool
	appendTime bool
}

// appendStored appends a produced batch's records in their stored form
// (spec decision 3): the value bytes as they are, the key, the headers and
// the producer's timestamp, each record with a fresh message id. Records
// of an encrypted queue are sealed whole here (value, key, headers,
// timestamp), before any proposal. A record without a stored timestamp is
// read with its chunk's append time: so are LogAppendTime batches and every
// record of a LogAppendTime topic.
func (b *Broker) appendStored(dst []byte, batch *records.Batch, form storedForm) ([]byte, error) {
	first := b.ids.first(len(batch.Records))
	var hdrs []wire.Header
	appendTime := form.appendTime || batch.TimestampType() == records.LogAppendTime
	for i := range batch.Records {
		rec := storage.KafkaRecord(&batch.Records[i], first.Plus(uint64(i)), appendTime, hdrs[:0])
		hdrs = rec.Headers
		if form.seal {
			if err := b.engine.SealRecord(&rec); err != nil {
				return dst, err
			}
		}
		dst = wire.AppendRecord(dst, &rec)
	}
	return dst, nil
}

// fetchRecord turns a stored record into the Kafka record a consumer gets:
// records pushed over HTTP have no key or headers, their JSON text as value
// and their append time as timestamp.
func fetchRecord(rec *wire.Record, appendMs int64, delta int32) records.Record {
	out := records.Record{OffsetDelta: delta, Timestamp: appendMs, Value: rec.Payload}
	if rec.Flags&wire.FlagTimestamp != 0 {
		out.Timestamp = rec.Timestamp
	}
	if rec.Flags&wire.FlagKey != 0 {
		out.Key = rec.Key
	}
	switch {
	case rec.Flags&wire.FlagNullValue != 0:
		out.Value = nil
	case out.Value == nil:
		out.Value = []byte{}
	}
	if len(rec.Headers) > 0 {
		out.Headers = make([]records.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			out.Headers[i] = records.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}
