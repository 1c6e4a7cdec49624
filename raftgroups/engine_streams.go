package raftgroups

import (
	"errors"

	"github.com/queen-mq/queen/wire"
)

// ErrStreamsFormat refuses a Streams cycle's acknowledgment to a raft group
// whose active format is below wire.FormatV3: a member still running an
// older build would refuse the operation where the others apply it. The
// leader raises the format once every member runs a build that knows it.
var ErrStreamsFormat = errors.New("raftgroups: the source partition's raft group is not yet at the format Streams need (a member runs an older build)")

// planStreamAck routes a transaction's stream acknowledgment to the group
// holding its partition, sealing its error text when the partition's queue
// is encrypted (it becomes the DLQ row's error).
func (e *Engine) planStreamAck(tenant wire.ID, op wire.TxnOp) (int, wire.TxnOp, wire.Code, error) {
	o, err := wire.DecodeStreamAckOp(op.Body)
	if err != nil || o.Tenant != tenant {
		return 0, op, wire.CodeBadRequest, nil
	}
	g := wire.GroupOfID(o.PartitionID)
	if g >= len(e.host.groups) {
		return 0, op, wire.CodePartitionNotFound, nil
	}
	if e.ActiveFormat(g) < wire.FormatV3 {
		return 0, op, wire.CodeOK, ErrStreamsFormat
	}
	if o.Error != "" && e.partitionEncrypted(tenant, o.PartitionID) {
		sealed, err := e.SealText([]byte(o.Error))
		if err != nil {
			return 0, op, wire.CodeOK, err
		}
		o.Error = string(sealed)
		op.Body = o.Encode(nil)
	}
	return g, op, wire.CodeOK, nil
}
