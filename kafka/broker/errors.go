package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Situations the handlers name and the mapping below turns into codes.
var (
	errNotLeader         = errors.New("kafka: this node does not lead the partition's raft group")
	errNotTxnCoordinator = errors.New("kafka: this node does not coordinate the transactional id (it does not lead the id's raft group)")
	errNotKafkaTopic     = errors.New("kafka: the queue was created over HTTP; configure it with /api/v1/configure")
	errInvalidTopic      = errors.New("kafka: invalid topic name")
	errTxnAborted        = errors.New("kafka: the transaction was aborted before its commit (a raft group it staged in gave up waiting for the decision); initialise the producer again")
	errTxnState          = errors.New("kafka: the request does not fit the transaction's state")
	errTxnTimeout        = errors.New("kafka: transaction timeout out of range")
	errTxnNotAdded       = errors.New("kafka: partition not added to the transaction")
	errBadBatch          = errors.New("kafka: record batch not acceptable here")
	errUnsupportedOp     = errors.New("kafka: operation not supported")
	errPartitionsLimits  = errors.New("kafka: partition count out of range")
	errOffsetOutOfRange  = errors.New("kafka: offset outside the partition's log")
	errReplicationFactor = errors.New("kafka: replication factor out of range")
	errRequiredAcks      = errors.New("kafka: acks must be -1, 0 or 1")
	errNotCaughtUp       = errors.New("kafka: this node was just elected leader and has not applied everything committed before it; try again")
	errFencedEpoch       = errors.New("kafka: the client's leader epoch is older than the partition's")
	errUnknownEpoch      = errors.New("kafka: the client's leader epoch is newer than this node knows")
	errNoFetchSession    = errors.New("kafka: no such fetch session (sessions are not granted; send full fetches)")
	errFetchSessionEpoch = errors.New("kafka: a fetch session epoch without a session")
)

// errorCode is THE mapping of engine, storage and codec errors to Kafka
// error codes for partition-level answers (produce, fetch, offsets, topic
// administration). Coordinator APIs use coordinatorCode.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	if code, ok := policyCode(err); ok { // a plan's refusal (proxy_hooks.go)
		return code
	}
	switch {
	case errors.Is(err, errNotLeader), errors.Is(err, errNotTxnCoordinator), errors.Is(err, raftgroups.ErrNoLeader),
		errors.Is(err, raftgroups.ErrClosed), errors.Is(err, raftgroups.ErrStandby), // a standby takes writes once promoted
		errors.Is(err, wire.ErrPartitionMoving): // sealed for a move: Metadata names the new group's leader after the switch
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, raftgroups.ErrOverloaded), errors.Is(err, wire.ErrSealRequired), errors.Is(err, wire.ErrSequenceAhead):
		// Retriable, nothing was written: an overloaded group proposed
		// nothing; a refused unsealed batch is sealed on retry, this
		// node's replica now having the configure the refusal met; an
		// earlier batch of the producer is on its way.
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, raftgroups.ErrOutcomeUnknown), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code // may or may not have been written
	case errors.Is(err, raftgroups.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, raftgroups.ErrStorageFull):
		return kerr.KafkaStorageError.Code // retriable: clients back off until space is freed
	case errors.Is(err, storage.ErrCorrupt):
		return kerr.KafkaStorageError.Code // the stored bytes failed their checksum; never served
	case errors.Is(err, wire.ErrQueueNotFound), errors.Is(err, wire.ErrPartitionNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, wire.ErrOutOfOrder):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, wire.ErrUnknownProducer):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, wire.ErrTxnUnsettled):
		// Kafka's answer while the coordinator writes the previous
		// transaction's markers: clients retry InitProducerId and
		// AddPartitionsToTxn on it.
		return kerr.ConcurrentTransactions.Code
	case errors.Is(err, wire.ErrFenced), errors.Is(err, errTxnAborted):
		// An aborted commit too: as for a transaction Kafka's coordinator
		// aborted, clients (KIP-588) re-initialise and start over.
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, wire.ErrNotFound):
		return kerr.InvalidProducerIDMapping.Code
	case errors.Is(err, wire.ErrExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, wire.ErrInvalidPartitions), errors.Is(err, errPartitionsLimits):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, wire.ErrUnknownConfig), errors.Is(err, wire.ErrInvalidConfig), errors.Is(err, errUnsupportedOp):
		return kerr.InvalidConfig.Code
	case errors.Is(err, errNotKafkaTopic), errors.Is(err, errPartitionBudget), errors.Is(err, errCompactOnly):
		return kerr.PolicyViolation.Code
	case errors.Is(err, errInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, errTxnState), errors.Is(err, errTxnNotAdded), errors.Is(err, wire.ErrConflict):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, errTxnTimeout):
		return kerr.InvalidTransactionTimeout.Code
	case errors.Is(err, errRequiredAcks):
		return kerr.InvalidRequiredAcks.Code
	case errors.Is(err, errReplicationFactor):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, errOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, errNotCaughtUp):
		return kerr.OffsetNotAvailable.Code
	case errors.Is(err, errFencedEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, errUnknownEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, errNoFetchSession):
		return kerr.FetchSessionIDNotFound.Code
	case errors.Is(err, errFetchSessionEpoch):
		return kerr.InvalidFetchSessionEpoch.Code
	case errors.Is(err, errBadBatch):
		return kerr.InvalidRecord.Code
	case errors.Is(err, wire.ErrBadRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, records.ErrOverBudget):
		// The batch would fit in a request of its own: retriable, nothing
		// was written, as for an overloaded group.
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, records.ErrCorrupt), errors.Is(err, records.ErrTooLarge),
		errors.Is(err, records.ErrUnsupportedCompression), errors.Is(err, records.ErrUnsupportedMagic):
		return kafka.RecordsErrorCode(err)
	case errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}

// coordinatorCode maps errors for the transaction coordinator's APIs: where
// a partition API says NOT_LEADER_OR_FOLLOWER, a coordinator says
// NOT_COORDINATOR, and an overloaded group is a coordinator still loading.
func coordinatorCode(err error) int16 {
	switch code := errorCode(err); code {
	case kerr.NotLeaderForPartition.Code:
		return kerr.NotCoordinator.Code
	case kerr.NotEnoughReplicas.Code:
		return kerr.CoordinatorLoadInProgress.Code
	default:
		return code
	}
}

// errorMessage is the text sent along with a code where the protocol has
// room for one: the error's own words, except for server faults.
func errorMessage(err error) *string {
	if err == nil || errorCode(err) == kerr.UnknownServerError.Code {
		return nil
	}
	s := err.Error()
	return &s
}
