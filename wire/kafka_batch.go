package wire

import "encoding/binary"

// A Kafka record batch kept as produced travels in a KafkaProduceCmd (with
// PushKafkaBatch) and is stored as one chunk in this layout: the first
// record's message id, the size its records section inflates to, then the
// RecordBatch v2 bytes exactly as the producer sent them. The other records'
// message ids follow from the first (ID.Plus), so a batch of any size costs
// 20 bytes over what the producer sent.
const KafkaBatchHeaderSize = 20

// AppendKafkaBatch appends a kept batch: its first message id, the size of
// its records once inflated, and the batch.
func AppendKafkaBatch(b []byte, first ID, inflated int, batch []byte) []byte {
	return append(AppendKafkaBatchHeader(b, first, inflated), batch...)
}

// AppendKafkaBatchHeader appends what AppendKafkaBatch puts before the
// batch, for a caller that writes the batch itself elsewhere
// (wire.Command.Tail).
func AppendKafkaBatchHeader(b []byte, first ID, inflated int) []byte {
	b = append(b, first[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(inflated))
}

// SplitKafkaBatch splits a kept batch into its parts; ok is false when b is
// too short to hold one.
func SplitKafkaBatch(b []byte) (first ID, inflated int, batch []byte, ok bool) {
	if len(b) < KafkaBatchHeaderSize {
		return first, 0, nil, false
	}
	copy(first[:], b)
	return first, int(binary.BigEndian.Uint32(b[16:])), b[KafkaBatchHeaderSize:], true
}

// Plus is the id n places after id in a run of UUIDv7 ids that share their
// time and rand_a bits and count up in rand_b (the variant bits kept): how
// the records of a produced batch get their message ids from the first.
func (id ID) Plus(n uint64) ID {
	const randB = 1<<62 - 1
	v := binary.BigEndian.Uint64(id[8:])
	binary.BigEndian.PutUint64(id[8:], v&^randB|(v+n)&randB)
	return id
}
