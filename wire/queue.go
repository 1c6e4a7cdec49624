package wire

import "strings"

// QueueConfig is a queue's effective options (spec queen.md §1.2). Durations
// are whole seconds or milliseconds as the field name says.
type QueueConfig struct {
	LeaseTimeSec            uint32
	RetryLimit              uint32
	RetryDelayMs            uint32
	Priority                int32
	MaxSize                 uint32
	TTLSec                  uint32
	DelayedProcessingSec    uint32
	WindowBufferSec         uint32
	RetentionSec            uint32
	CompletedRetentionSec   uint32
	RetentionEnabled        bool
	EncryptionEnabled       bool
	DeadLetterQueue         bool
	DLQAfterMaxRetries      bool
	MaxWaitTimeSec          uint32
	MinPopWaitMs            uint32
	DedupWindowSec          uint32
	RetentionSinkHold       string
	RetentionSinkHoldMaxSec uint32
}

// Option bits name QueueConfig fields in a configure command's Set and Reset
// masks, so a merge can say exactly which options it touches.
const (
	OptLeaseTime uint32 = 1 << iota
	OptRetryLimit
	OptRetryDelay
	OptPriority
	OptMaxSize
	OptTTL
	OptDelayedProcessing
	OptWindowBuffer
	OptRetentionSeconds
	OptCompletedRetentionSeconds
	OptRetentionEnabled
	OptEncryptionEnabled
	OptDeadLetterQueue
	OptDLQAfterMaxRetries
	OptMaxWaitTimeSeconds
	OptMinPopWaitTime
	OptDedupWindowSeconds
	OptRetentionSinkHold
	OptRetentionSinkHoldMaxSeconds

	OptAll = OptRetentionSinkHoldMaxSeconds<<1 - 1
)

// DefaultQueueConfig is the configure default of spec §1.2.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		LeaseTimeSec:            300,
		RetryLimit:              3,
		RetryDelayMs:            1000,
		TTLSec:                  3600,
		DeadLetterQueue:         true,
		DLQAfterMaxRetries:      true,
		DedupWindowSec:          3600,
		RetentionSinkHoldMaxSec: 604800,
	}
}

// PushCreatedQueueConfig is the config of a queue created implicitly by its
// first push: the configure default with a 60 s lease.
func PushCreatedQueueConfig() QueueConfig {
	c := DefaultQueueConfig()
	c.LeaseTimeSec = 60
	return c
}

// DLQEnabled reports whether exhausted messages go to the dead-letter queue;
// it is off only when both switches are off (spec §1.2).
func (c *QueueConfig) DLQEnabled() bool { return c.DeadLetterQueue || c.DLQAfterMaxRetries }

// Merge copies the options named in set from src into c, and restores the
// defaults of the options named in reset.
func (c *QueueConfig) Merge(src *QueueConfig, set, reset uint32) {
	def := DefaultQueueConfig()
	pick := func(bit uint32) (*QueueConfig, bool) {
		switch {
		case reset&bit != 0:
			return &def, true
		case set&bit != 0:
			return src, true
		}
		return nil, false
	}
	if s, ok := pick(OptLeaseTime); ok {
		c.LeaseTimeSec = s.LeaseTimeSec
	}
	if s, ok := pick(OptRetryLimit); ok {
		c.RetryLimit = s.RetryLimit
	}
	if s, ok := pick(OptRetryDelay); ok {
		c.RetryDelayMs = s.RetryDelayMs
	}
	if s, ok := pick(OptPriority); ok {
		c.Priority = s.Priority
	}
	if s, ok := pick(OptMaxSize); ok {
		c.MaxSize = s.MaxSize
	}
	if s, ok := pick(OptTTL); ok {
		c.TTLSec = s.TTLSec
	}
	if s, ok := pick(OptDelayedProcessing); ok {
		c.DelayedProcessingSec = s.DelayedProcessingSec
	}
	if s, ok := pick(OptWindowBuffer); ok {
		c.WindowBufferSec = s.WindowBufferSec
	}
	if s, ok := pick(OptRetentionSeconds); ok {
		c.RetentionSec = s.RetentionSec
	}
	if s, ok := pick(OptCompletedRetentionSeconds); ok {
		c.CompletedRetentionSec = s.CompletedRetentionSec
	}
	if s, ok := pick(OptRetentionEnabled); ok {
		c.RetentionEnabled = s.RetentionEnabled
	}
	if s, ok := pick(OptEncryptionEnabled); ok {
		c.EncryptionEnabled = s.EncryptionEnabled
	}
	if s, ok := pick(OptDeadLetterQueue); ok {
		c.DeadLetterQueue = s.DeadLetterQueue
	}
	if s, ok := pick(OptDLQAfterMaxRetries); ok {
		c.DLQAfterMaxRetries = s.DLQAfterMaxRetries
	}
	if s, ok := pick(OptMaxWaitTimeSeconds); ok {
		c.MaxWaitTimeSec = s.MaxWaitTimeSec
	}
	if s, ok := pick(OptMinPopWaitTime); ok {
		c.MinPopWaitMs = s.MinPopWaitMs
	}
	if s, ok := pick(OptDedupWindowSeconds); ok {
		c.DedupWindowSec = s.DedupWindowSec
	}
	if s, ok := pick(OptRetentionSinkHold); ok {
		c.RetentionSinkHold = s.RetentionSinkHold
	}
	if s, ok := pick(OptRetentionSinkHoldMaxSeconds); ok {
		c.RetentionSinkHoldMaxSec = s.RetentionSinkHoldMaxSec
	}
}

// Encode appends c.
func (c *QueueConfig) Encode(w *Writer) {
	w.Uvarint(uint64(c.LeaseTimeSec))
	w.Uvarint(uint64(c.RetryLimit))
	w.Uvarint(uint64(c.RetryDelayMs))
	w.Varint(int64(c.Priority))
	w.Uvarint(uint64(c.MaxSize))
	w.Uvarint(uint64(c.TTLSec))
	w.Uvarint(uint64(c.DelayedProcessingSec))
	w.Uvarint(uint64(c.WindowBufferSec))
	w.Uvarint(uint64(c.RetentionSec))
	w.Uvarint(uint64(c.CompletedRetentionSec))
	w.Bool(c.RetentionEnabled)
	w.Bool(c.EncryptionEnabled)
	w.Bool(c.DeadLetterQueue)
	w.Bool(c.DLQAfterMaxRetries)
	w.Uvarint(uint64(c.MaxWaitTimeSec))
	w.Uvarint(uint64(c.MinPopWaitMs))
	w.Uvarint(uint64(c.DedupWindowSec))
	w.String(c.RetentionSinkHold)
	w.Uvarint(uint64(c.RetentionSinkHoldMaxSec))
}

// Decode reads what Encode wrote.
func (c *QueueConfig) Decode(r *Reader) {
	c.LeaseTimeSec = r.u32()
	c.RetryLimit = r.u32()
	c.RetryDelayMs = r.u32()
	c.Priority = int32(r.Varint())
	c.MaxSize = r.u32()
	c.TTLSec = r.u32()
	c.DelayedProcessingSec = r.u32()
	c.WindowBufferSec = r.u32()
	c.RetentionSec = r.u32()
	c.CompletedRetentionSec = r.u32()
	c.RetentionEnabled = r.Bool()
	c.EncryptionEnabled = r.Bool()
	c.DeadLetterQueue = r.Bool()
	c.DLQAfterMaxRetries = r.Bool()
	c.MaxWaitTimeSec = r.u32()
	c.MinPopWaitMs = r.u32()
	c.DedupWindowSec = r.u32()
	c.RetentionSinkHold = r.String()
	c.RetentionSinkHoldMaxSec = r.u32()
}

func (r *Reader) u32() uint32 {
	v := r.Uvarint()
	if v > 1<<32-1 {
		r.fail("u32 out of range")
		return 0
	}
	return uint32(v)
}

// QueueLabels derives a queue's namespace and task from the first two
// dot-separated parts of its name ("billing.invoice.v1" → "billing",
// "invoice"), as Queen labels queues created implicitly; a name without a
// dot has neither.
func QueueLabels(queue string) (namespace, task string) {
	first, rest, ok := strings.Cut(queue, ".")
	if !ok {
		return "", ""
	}
	second, _, _ := strings.Cut(rest, ".")
	return first, second
}
