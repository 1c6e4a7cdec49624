package wire

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// Kind names a command inside a raft entry.
type Kind uint8

// Command kinds. Never renumber: they are in raft logs and snapshots.
const (
	KindPush           Kind = 1
	KindPop            Kind = 2
	KindAck            Kind = 3
	KindExtendLease    Kind = 4
	KindCommitPosition Kind = 5
	KindConfigure      Kind = 6
	KindDeleteQueue    Kind = 7
	// KindTick carries no body: the leader proposes one when the store
	// says time-driven work is due (lease and retention sweeps, timers);
	// the entry's clock stamp is the "now" that work runs at.
	KindTick Kind = 8

	// KV, locks, timers and traces.
	KindKV     Kind = 50
	KindLocks  Kind = 51
	KindTimers Kind = 52
	KindTrace  Kind = 53
	// KindTimerFired records a timer fire's outcome (TimerFiredCmd).
	KindTimerFired Kind = 54
	// Consumer-group and message administration (range 20..29).
	KindSeek          Kind = 20 // move a group's cursors to the end or to a time
	KindDeleteGroup   Kind = 21 // drop a group's cursors (and its subscriptions)
	KindSubscription  Kind = 22 // change where a group starts untouched partitions
	KindDLQPurge      Kind = 23 // delete dead-lettered rows
	KindDLQReplay     Kind = 24 // push a dead-lettered message again
	KindDeleteMessage Kind = 25 // erase one message's payload
	// Kafka facade (30..39; see kafka_*.go).
	KindKafkaProduce          Kind = 30 // KafkaProduceCmd: a producer-checked append
	KindKafkaInitProducer     Kind = 31 // InitProducerCmd
	KindKafkaCreateTopic      Kind = 32 // CreateTopicCmd
	KindKafkaCreatePartitions Kind = 33 // CreatePartitionsCmd
	KindKafkaDeleteTopic      Kind = 34 // DeleteTopicCmd
	KindKafkaTopicConfig      Kind = 35 // TopicConfigCmd
	KindKafkaTxnBegin         Kind = 36 // TxnBeginCmd
	KindKafkaTxnEnd           Kind = 37 // TxnEndCmd: a whole transaction's commit or abort
	KindKafkaRegisterNode     Kind = 38 // RegisterNodeCmd (group 0 only)
	KindKafkaStage            Kind = 39 // KafkaStageCmd: a piece of an open transaction

	// Numbers 9..19 are reserved for the HTTP data plane, 20..29 for
	// consumer-group and message administration, 30..49 for the Kafka
	// facade (30..39 its data path and transactions, 40..49 its consumer
	// groups), 50..69 for KV, locks, timers and traces.

	// KindTransaction commits pushes, acks and position writes all
	// together or not at all (txn.go).
	KindTransaction Kind = 9

	// Placement (placement.go): a queue's catalog at its home group and
	// its shards in the groups holding its partitions.
	KindAlloc       Kind = 10 // AllocCmd (home)
	KindEnsureShard Kind = 11 // EnsureShardCmd (any group)
	KindDropShard   Kind = 12 // DropShardCmd (any group but the home)
	KindSubscribe   Kind = 13 // SubscribeCmd (home)

	// Cross-group transactions (xtxn.go).
	KindXPrepare Kind = 14
	KindXDecide  Kind = 15
	KindXResolve Kind = 16
	KindXForget  Kind = 17

	// Kafka consumer groups (range 40..49, wire/kafka_groups.go).
	KindDeleteOffsets Kind = 40 // drop a group's positions in named partitions
	KindGroupMembers  Kind = 41 // GroupMembersCmd: a consumer group's membership

	// KindKafkaTxnSettled (TxnSettledCmd) lets a transactional id begin its
	// next transaction; in the consumer-group range because 30..39 is full.
	KindKafkaTxnSettled Kind = 48

	// KindSetFormat (SetFormatCmd, format.go) raises a group's active
	// format: the cluster version gate.
	KindSetFormat Kind = 27

	// KindKafkaLogClean is a Kafka topic's retention.bytes and compaction
	// in one partition (LogCleanCmd), from the top of the Kafka range so
	// the consumer-group kinds keep theirs.
	KindKafkaLogClean Kind = 49
)

const (
	entryMagic   = 0x51 // 'Q'
	entryVersion = 1

	// MaxCommandsPerEntry bounds how many commands one raft entry may carry.
	MaxCommandsPerEntry = 1 << 16
)

// Command is one encoded command waiting to be proposed. Its encoded body
// is Body followed by Tail: a large part that arrived whole (a produced
// batch, as read from the connection) goes in Tail and is copied once,
// into the raft entry, instead of into Body first. A decoded command has
// no Tail. Tail must not change until the command's entry is built.
type Command struct {
	Kind Kind
	Body []byte
	Tail []byte
}

// EncodedLen is how many bytes the command takes inside an entry.
func (c Command) EncodedLen() int {
	n := len(c.Body) + len(c.Tail)
	return 1 + uvarintLen(uint64(n)) + n
}

// entryFlagRetry marks an entry proposed again after an attempt whose
// outcome is unknown: the state machine then checks every record for a
// duplicate, not only those with client-chosen transaction ids.
const entryFlagRetry = 1

// entryFlagID says an 8-byte entry id follows the clock stamp. Entries
// written before ids existed lack it and still parse.
const entryFlagID = 2

// RetryWindowMs bounds how long after an entry's clock stamp the proposer
// may propose it again. The state machine remembers what it needs to
// recognise the attempts of one proposal (ids of retried entries, replies
// of commands a repeat would not leave alone) for RememberRetriesMs, twice
// as long, so that clock skew between nodes and an attempt applied late
// still fall inside what is remembered.
const (
	RetryWindowMs     = 60_000
	RememberRetriesMs = 2 * RetryWindowMs
)

// AppendEntry appends a raft entry carrying cmds, stamped with the
// proposer's clock in unix milliseconds and a random id. The state machine
// never reads a clock: every notion of "now" it has comes from this stamp.
// Every attempt of one proposal carries the same bytes (MarkRetry copies
// them), so the id and the stamp tell the attempts of one proposal apart
// from any other entry.
func AppendEntry(b []byte, nowMs int64, cmds []Command) []byte {
	id := rand.Uint64()
	if id == 0 {
		id = 1 // 0 means "no id"
	}
	return AppendEntryID(b, nowMs, id, cmds)
}

// AppendEntryID is AppendEntry with a given id (0: none).
func AppendEntryID(b []byte, nowMs int64, id uint64, cmds []Command) []byte {
	w := Writer{B: b}
	w.U8(entryMagic)
	w.U8(entryVersion)
	var flags uint8
	if id != 0 {
		flags |= entryFlagID
	}
	w.U8(flags)
	w.Varint(nowMs)
	if id != 0 {
		w.B = binary.BigEndian.AppendUint64(w.B, id)
	}
	w.Uvarint(uint64(len(cmds)))
	for _, c := range cmds {
		w.U8(uint8(c.Kind))
		w.Uvarint(uint64(len(c.Body) + len(c.Tail)))
		w.Fixed(c.Body)
		w.Fixed(c.Tail)
	}
	return w.B
}

// MarkRetry returns a copy of an encoded entry flagged as a retry. The
// retry usually applies after the attempt it repeats, but not always: a
// proposal forwarded to a leader that was deposed meanwhile may be passed
// on to the new leader after the retry reached it. The state machine
// handles both orders (storage/retries.go).
func MarkRetry(entry []byte) []byte {
	out := append([]byte(nil), entry...)
	if len(out) > 2 {
		out[2] |= entryFlagRetry
	}
	return out
}

// Entry is a decoded raft entry; Next walks its commands without copying.
type Entry struct {
	Retry bool
	NowMs int64
	// ID is the proposal's random id, the same in every attempt (0: an
	// entry written without one).
	ID    uint64
	Count int
	r     Reader
	seen  int
}

// ParseEntry decodes an entry header. Command bodies alias b.
func ParseEntry(b []byte) (Entry, error) {
	r := Reader{b: b}
	if r.U8() != entryMagic {
		return Entry{}, fmt.Errorf("%w: bad entry magic", ErrMalformed)
	}
	if v := r.U8(); v != entryVersion {
		return Entry{}, fmt.Errorf("%w: entry version %d", ErrMalformed, v)
	}
	flags := r.U8()
	e := Entry{Retry: flags&entryFlagRetry != 0, NowMs: r.Varint()}
	if flags&entryFlagID != 0 {
		if b := r.Fixed(8); b != nil {
			if e.ID = binary.BigEndian.Uint64(b); e.ID == 0 {
				return Entry{}, fmt.Errorf("%w: zero entry id", ErrMalformed)
			}
		}
	}
	e.Count = r.Count(MaxCommandsPerEntry, 2)
	if r.err != nil {
		return Entry{}, r.err
	}
	e.r = r
	return e, nil
}

// Next returns the next command; ok is false at the end or on a malformed
// entry (then Err says why).
func (e *Entry) Next() (Command, bool) {
	if e.seen >= e.Count || e.r.err != nil {
		return Command{}, false
	}
	k := Kind(e.r.U8())
	body := e.r.Bytes()
	if e.r.err != nil {
		return Command{}, false
	}
	e.seen++
	return Command{Kind: k, Body: body}, true
}

// Err reports a decoding error met by Next, or trailing garbage.
func (e *Entry) Err() error {
	if e.r.err == nil && e.seen == e.Count && e.r.Len() != 0 {
		return fmt.Errorf("%w: trailing bytes after entry", ErrMalformed)
	}
	return e.r.err
}

// AppendResults frames per-command results in command order; the proposer
// splits them back out with SplitResults.
func AppendResults(b []byte, results [][]byte) []byte {
	w := Writer{B: b}
	w.Uvarint(uint64(len(results)))
	for _, r := range results {
		w.Bytes(r)
	}
	return w.B
}

// SplitResults undoes AppendResults. The slices alias b.
func SplitResults(b []byte) ([][]byte, error) {
	r := Reader{b: b}
	n := r.Count(MaxCommandsPerEntry, 1)
	out := make([][]byte, n)
	for i := range out {
		out[i] = r.Bytes()
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return out, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
