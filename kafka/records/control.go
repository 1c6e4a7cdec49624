package records

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record: the end of a transaction.
type ControlType int16

const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	}
	return fmt.Sprintf("unknown(%d)", int16(t))
}

// ControlMarker describes a transaction marker: a control batch holding one
// control record that commits or aborts the producer's open transaction on a
// partition.
type ControlMarker struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	ProducerID           int64
	ProducerEpoch        int16
	Type                 ControlType
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the marker.
	CoordinatorEpoch int32
	// Timestamp is the time the marker was written, in milliseconds.
	Timestamp int64
}

// controlRecordSize is the encoded size of the one record of a control
// batch: its key is version+type (4 bytes), its value version+epoch (6).
const controlRecordSize = 1 + 1 + 1 + 1 + 1 + 4 + 1 + 6 + 1

// AppendControlBatch appends a control batch for m to dst. It never
// allocates when dst has HeaderSize+controlRecordSize bytes of room.
func AppendControlBatch(dst []byte, m ControlMarker) []byte {
	start := len(dst)
	dst = appendHeader(dst, header{
		baseOffset:      m.BaseOffset,
		leaderEpoch:     m.PartitionLeaderEpoch,
		attributes:      makeAttributes(CompressionNone, CreateTime, true, true),
		lastOffsetDelta: 0,
		firstTimestamp:  m.Timestamp,
		maxTimestamp:    m.Timestamp,
		producerID:      m.ProducerID,
		producerEpoch:   m.ProducerEpoch,
		baseSequence:    NoSequence,
		count:           1,
	})
	dst = binary.AppendVarint(dst, controlRecordSize-1) // body length
	dst = append(dst, 0)                                // attributes
	dst = binary.AppendVarint(dst, 0)                   // timestamp delta
	dst = binary.AppendVarint(dst, 0)                   // offset delta
	dst = binary.AppendVarint(dst, 4)                   // key: version, type
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(m.Type))
	dst = binary.AppendVarint(dst, 6) // value: version, coordinator epoch
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.CoordinatorEpoch))
	dst = binary.AppendVarint(dst, 0) // no headers
	finishBatch(dst[start:])
	return dst
}

// ParseControlRecord reads the type and coordinator epoch of a record from a
// control batch. Unknown key versions are refused; a value shorter than the
// v0 layout leaves the coordinator epoch at -1, as Kafka tolerates.
func ParseControlRecord(r *Record) (ControlType, int32, error) {
	if len(r.Key) < 4 {
		return 0, 0, fmt.Errorf("%w: control record key of %d bytes", ErrCorrupt, len(r.Key))
	}
	if v := int16(binary.BigEndian.Uint16(r.Key)); v != 0 {
		return 0, 0, fmt.Errorf("%w: control record key version %d", ErrCorrupt, v)
	}
	t := ControlType(binary.BigEndian.Uint16(r.Key[2:]))
	epoch := int32(-1)
	if len(r.Value) >= 6 {
		epoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	}
	return t, epoch, nil
}
