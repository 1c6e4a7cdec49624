package storage

import (
	"fmt"
	"sync"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/wire"
)

// Kafka batches kept as produced. A produce of an unencrypted topic whose
// records carry their producer's time stores each batch as the producer
// sent it (wire.AppendKafkaBatch), compressed or not, with its CRC and
// producer fields: Kafka fetch copies it to the socket, and every other
// reader (HTTP pops, views, the DLQ, compaction) decodes it here into the
// stored records a produce would have written (KafkaRecord), so nothing
// past this file tells the two forms apart. A chunk that has to change (a
// message erased, a compaction) is rewritten as stored records.

// KafkaRecord is the stored record of a produced Kafka record with message
// id id: the value as the payload, the key and headers as they are, and
// the producer's timestamp unless appendTime (the append time is then the
// record's time). Produce and the decoding of kept batches both build
// stored records with it, so the two forms read the same.
func KafkaRecord(r *records.Record, id wire.ID, appendTime bool, hdrs []wire.Header) wire.Record {
	rec := wire.Record{Flags: wire.FlagTimestamp, MsgID: id, Timestamp: r.Timestamp, Payload: r.Value}
	if appendTime {
		rec.Flags = 0
	}
	if r.Key != nil {
		rec.Flags |= wire.FlagKey
		rec.Key = r.Key
	}
	if r.Value == nil {
		rec.Flags |= wire.FlagNullValue
	}
	if len(r.Headers) > 0 {
		rec.Flags |= wire.FlagHeaders
		for _, h := range r.Headers {
			hdrs = append(hdrs, wire.Header{Key: h.Key, Value: h.Value})
		}
		rec.Headers = hdrs
	}
	return rec
}

// keptRecords is the kept batch at loc, of count records, decoded into
// stored records, from the recently decoded ones when it is there. own:
// the appending goroutine reads (records of the batch being applied may
// still be pending, and are not kept decoded).
func (sg *segments) keptRecords(loc location, count int, own bool) ([]byte, error) {
	if recs := sg.decoded.get(loc); recs != nil {
		return recs, nil
	}
	kept, err := sg.readAs(loc, nil, own)
	if err != nil {
		return nil, err
	}
	out, err := keptBatchRecords(kept, count)
	if err != nil {
		return nil, err
	}
	if !own || !sg.isPending(loc) {
		sg.decoded.put(loc, out)
	}
	return out, nil
}

// decodedBatches keeps the last few kept batches decoded: an HTTP consumer
// popping a few records at a time, and its acks (which the apply loop
// checks against the leased records), would otherwise decode, and inflate,
// a whole batch for every pop. A chunk's bytes never change where they
// are (a rewrite stores them elsewhere, and segment names are never
// reused), so its location names its decoded records for good. Callers
// only read what they get.
type decodedBatches struct {
	mu      sync.Mutex
	entries [decodedBatchSlots]decodedBatch
	next    int
}

type decodedBatch struct {
	segment uint64
	offset  int64
	records []byte
}

// Bounds of the decoded batches kept: how many, and the largest kept (a
// larger one is decoded each time rather than pinning its memory).
const (
	decodedBatchSlots = 16
	maxDecodedBatch   = 4 << 20
)

func (d *decodedBatches) get(loc location) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.entries {
		if e := &d.entries[i]; e.records != nil && e.segment == loc.segment && e.offset == loc.offset {
			return e.records
		}
	}
	return nil
}

func (d *decodedBatches) put(loc location, records []byte) {
	if len(records) > maxDecodedBatch {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.entries[d.next] = decodedBatch{segment: loc.segment, offset: loc.offset, records: records}
	d.next = (d.next + 1) % decodedBatchSlots
}

// keptBatchRecords decodes a kept batch of count records into stored
// records, verifying its CRC first. The bound it inflates under is the
// produce path's default or the size the batch inflated to when produced,
// whichever is larger: a zstd frame may announce a window larger than its
// content, which a bound of just the content would refuse.
func keptBatchRecords(kept []byte, count int) ([]byte, error) {
	first, inflated, raw, ok := wire.SplitKafkaBatch(kept)
	if !ok {
		return nil, fmt.Errorf("%w: a kept batch of %d bytes", errBadKeptBatch, len(kept))
	}
	batches, err := records.Decode(raw, records.Limits{MaxDecompressedBytes: max(inflated, records.DefaultMaxDecompressedBytes)})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadKeptBatch, err)
	}
	if len(batches) != 1 {
		return nil, fmt.Errorf("%w: %d batches in one chunk", errBadKeptBatch, len(batches))
	}
	if n := len(batches[0].Records); n != count {
		return nil, fmt.Errorf("%w: %d records where the index says %d", errBadKeptBatch, n, count)
	}
	b := &batches[0]
	out := make([]byte, 0, b.InflatedSize+count*24)
	var hdrs []wire.Header
	for i := range b.Records {
		rec := KafkaRecord(&b.Records[i], first.Plus(uint64(i)), false, hdrs[:0])
		hdrs = rec.Headers
		out = wire.AppendRecord(out, &rec)
	}
	return out, nil
}

// keptBatchCount checks the records of a produce command holding a kept
// batch (wire.PushKafkaBatch) and returns its first message id and record
// count: the batch header's count, which must be the command's. The
// proposer decoded the whole batch; the state machine checks its frame and
// CRC (cheap next to decompressing it), as it checks the heads of stored
// records.
func keptBatchCount(c *wire.PushCmd) (wire.ID, int, bool) {
	first, _, raw, ok := wire.SplitKafkaBatch(c.Records)
	if !ok {
		return first, 0, false
	}
	h, err := records.CheckBatch(raw)
	if err != nil || h.NumRecords <= 0 || int(h.NumRecords) != c.Count {
		return first, 0, false
	}
	return first, c.Count, true
}
