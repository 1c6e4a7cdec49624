package wire

import "errors"

// Code is the outcome of one command (or one item of a command) as the state
// machine reports it. Codes cross the raft boundary as one byte; Err turns a
// code into the sentinel error the front doors map to HTTP statuses and Kafka
// error codes, each in one place.
type Code uint8

// Outcome codes. Never renumber: they are stored in results only, but a mixed
// version cluster compares them.
const (
	CodeOK                Code = 0
	CodeDuplicate         Code = 1  // a push whose transaction id was already stored
	CodeQueueNotFound     Code = 2  // the queue does not exist (and was not created)
	CodePartitionNotFound Code = 3  // no partition with that name or index
	CodeLeaseNotFound     Code = 4  // no live lease with that id
	CodeLeaseMismatch     Code = 5  // the ack names a lease that no longer holds the message
	CodeNotLeased         Code = 6  // the message is not in any live lease of the group
	CodeMessageNotFound   Code = 7  // no message with that transaction id in the partition
	CodeNoop              Code = 8  // the ack repeats one already applied
	CodeBadRequest        Code = 9  // the command is well-formed but not allowed
	CodeExists            Code = 10 // create of something that already exists
	CodeInvalidPartitions Code = 11 // partition count out of range or decreasing
	CodeOutOfOrder        Code = 12 // a producer sequence with a gap
	CodeFenced            Code = 13 // a producer epoch older than the current one
	CodeNotFound          Code = 14 // generic lookup miss (groups, DLQ rows, ...)
	CodeConflict          Code = 15 // a precondition on state did not hold
	CodeUnknownProducer   Code = 16 // a producer sequence past 0 from a producer with no state
	CodeSequenceAhead     Code = 17 // a producer sequence past the next one: an earlier batch is still on its way
	CodeSealRequired      Code = 18 // unsealed records for a queue whose options now ask for encryption
	CodePartitionGone     Code = 19 // the partition at that index was removed as idle and empty: allocate the name again
	CodeTxnUnsettled      Code = 20 // the transactional id's last transaction is not yet ended in every raft group it wrote to
	CodePartitionMoved    Code = 21 // the partition is being moved to another raft group (sealed) or was: resolve it again from the home
)

// Sentinel errors, one per non-OK code.
var (
	ErrDuplicate         = errors.New("duplicate")
	ErrQueueNotFound     = errors.New("queue not found")
	ErrPartitionNotFound = errors.New("partition not found")
	ErrLeaseNotFound     = errors.New("lease not found")
	ErrLeaseMismatch     = errors.New("lease no longer holds the message")
	ErrNotLeased         = errors.New("message is not leased")
	ErrMessageNotFound   = errors.New("message not found")
	ErrNoop              = errors.New("already acknowledged")
	ErrBadRequest        = errors.New("bad request")
	ErrExists            = errors.New("already exists")
	ErrInvalidPartitions = errors.New("invalid partition count")
	ErrOutOfOrder        = errors.New("out of order sequence")
	ErrFenced            = errors.New("producer fenced")
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("conflict")
	ErrUnknownProducer   = errors.New("no state for the producer: it expired or never produced here")
	ErrSequenceAhead     = errors.New("sequence ahead of the producer's next: an earlier batch has not landed yet; retry")
	ErrSealRequired      = errors.New("the queue's encryption was just turned on: the records must be sealed; retry")
	ErrTxnUnsettled      = errors.New("the previous transaction of this transactional id is still being ended in the raft groups it wrote to; retry")
	ErrPartitionMoving   = errors.New("the partition is moving to another raft group; retry")
	ErrUnknownCode       = errors.New("unknown outcome code")
)

var codeErrors = [...]error{
	CodeOK:                nil,
	CodeDuplicate:         ErrDuplicate,
	CodeQueueNotFound:     ErrQueueNotFound,
	CodePartitionNotFound: ErrPartitionNotFound,
	CodeLeaseNotFound:     ErrLeaseNotFound,
	CodeLeaseMismatch:     ErrLeaseMismatch,
	CodeNotLeased:         ErrNotLeased,
	CodeMessageNotFound:   ErrMessageNotFound,
	CodeNoop:              ErrNoop,
	CodeBadRequest:        ErrBadRequest,
	CodeExists:            ErrExists,
	CodeInvalidPartitions: ErrInvalidPartitions,
	CodeOutOfOrder:        ErrOutOfOrder,
	CodeFenced:            ErrFenced,
	CodeNotFound:          ErrNotFound,
	CodeConflict:          ErrConflict,
	CodeUnknownProducer:   ErrUnknownProducer,
	CodeSequenceAhead:     ErrSequenceAhead,
	CodeSealRequired:      ErrSealRequired,
	CodePartitionGone:     ErrPartitionNotFound,
	CodeTxnUnsettled:      ErrTxnUnsettled,
	CodePartitionMoved:    ErrPartitionMoving,
}

// Err returns the sentinel error for c, nil for CodeOK.
func (c Code) Err() error {
	if int(c) < len(codeErrors) {
		return codeErrors[c]
	}
	return ErrUnknownCode
}

// Every command result starts with a Code byte. A result that is only that
// byte is how the state machine refuses a command it could not decode, so
// callers check ResultCode before decoding the rest.

// ResultCode returns the code a result starts with, and whether the result
// is only that code.
func ResultCode(b []byte) (c Code, bare bool) {
	if len(b) == 0 {
		return CodeBadRequest, true
	}
	return Code(b[0]), len(b) == 1
}
