package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// queueOption is one option of spec §1.2: its JSON name, its bit in a
// configure command's masks, where it lives in wire.QueueConfig, and the
// values it accepts.
type queueOption struct {
	name     string
	bit      uint32
	field    func(*wire.QueueConfig) any // *uint32, *int32, *bool or *string
	min, max int64
	clamp    bool // out-of-range numbers are clamped, not refused
}

var sinkHoldName = regexp.MustCompile(`^[A-Za-z0-9._-]{0,64}$`)

// queueOptions lists every option configure accepts, in the order they
// are answered.
var queueOptions = []queueOption{
	{name: "leaseTime", bit: wire.OptLeaseTime, field: func(c *wire.QueueConfig) any { return &c.LeaseTimeSec }, min: 1, max: maxLeaseSeconds},
	{name: "retryLimit", bit: wire.OptRetryLimit, field: func(c *wire.QueueConfig) any { return &c.RetryLimit }, max: 1_000_000},
	{name: "retryDelay", bit: wire.OptRetryDelay, field: func(c *wire.QueueConfig) any { return &c.RetryDelayMs }, max: math.MaxUint32},
	{name: "priority", bit: wire.OptPriority, field: func(c *wire.QueueConfig) any { return &c.Priority }, min: math.MinInt32, max: math.MaxInt32},
	{name: "maxSize", bit: wire.OptMaxSize, field: func(c *wire.QueueConfig) any { return &c.MaxSize }, max: math.MaxUint32},
	{name: "ttl", bit: wire.OptTTL, field: func(c *wire.QueueConfig) any { return &c.TTLSec }, max: math.MaxUint32},
	{name: "delayedProcessing", bit: wire.OptDelayedProcessing, field: func(c *wire.QueueConfig) any { return &c.DelayedProcessingSec }, max: maxDurationSeconds},
	{name: "windowBuffer", bit: wire.OptWindowBuffer, field: func(c *wire.QueueConfig) any { return &c.WindowBufferSec }, max: maxDurationSeconds},
	{name: "retentionSeconds", bit: wire.OptRetentionSeconds, field: func(c *wire.QueueConfig) any { return &c.RetentionSec }, max: maxDurationSeconds},
	{name: "completedRetentionSeconds", bit: wire.OptCompletedRetentionSeconds, field: func(c *wire.QueueConfig) any { return &c.CompletedRetentionSec }, max: maxDurationSeconds},
	{name: "retentionEnabled", bit: wire.OptRetentionEnabled, field: func(c *wire.QueueConfig) any { return &c.RetentionEnabled }},
	{name: "encryptionEnabled", bit: wire.OptEncryptionEnabled, field: func(c *wire.QueueConfig) any { return &c.EncryptionEnabled }},
	{name: "deadLetterQueue", bit: wire.OptDeadLetterQueue, field: func(c *wire.QueueConfig) any { return &c.DeadLetterQueue }},
	{name: "dlqAfterMaxRetries", bit: wire.OptDLQAfterMaxRetries, field: func(c *wire.QueueConfig) any { return &c.DLQAfterMaxRetries }},
	{name: "maxWaitTimeSeconds", bit: wire.OptMaxWaitTimeSeconds, field: func(c *wire.QueueConfig) any { return &c.MaxWaitTimeSec }, max: maxDurationSeconds},
	{name: "minPopWaitTime", bit: wire.OptMinPopWaitTime, field: func(c *wire.QueueConfig) any { return &c.MinPopWaitMs }, max: 60000, clamp: true},
	{name: "dedupWindowSeconds", bit: wire.OptDedupWindowSeconds, field: func(c *wire.QueueConfig) any { return &c.DedupWindowSec }, max: maxDurationSeconds},
	{name: "retentionSinkHold", bit: wire.OptRetentionSinkHold, field: func(c *wire.QueueConfig) any { return &c.RetentionSinkHold }},
	{name: "retentionSinkHoldMaxSeconds", bit: wire.OptRetentionSinkHoldMaxSeconds, field: func(c *wire.QueueConfig) any { return &c.RetentionSinkHoldMaxSec }, min: 60, max: 31536000},
}

// maxDurationSeconds bounds the time options: ten years.
const maxDurationSeconds = 10 * 365 * 24 * 3600

// parse reads the option's JSON value into cfg.
func (o *queueOption) parse(raw json.RawMessage, cfg *wire.QueueConfig) error {
	bad := func(what string) error { return badRequest("option " + o.name + " must be " + what) }
	switch f := o.field(cfg).(type) {
	case *bool:
		if err := json.Unmarshal(raw, f); err != nil {
			return bad("true or false")
		}
	case *string:
		if err := json.Unmarshal(raw, f); err != nil || !sinkHoldName.MatchString(*f) {
			return bad("a name of up to 64 letters, digits, '.', '_' or '-'")
		}
	default:
		n, err := wholeNumber(raw)
		if err == nil && (n < o.min || n > o.max) {
			if !o.clamp {
				err = errOutOfRange
			}
			n = min(max(n, o.min), o.max)
		}
		if err != nil {
			return bad("a whole number in " + strconv.FormatInt(o.min, 10) + ".." + strconv.FormatInt(o.max, 10))
		}
		switch f := f.(type) {
		case *uint32:
			*f = uint32(n)
		case *int32:
			*f = int32(n)
		}
	}
	return nil
}

var errOutOfRange = badRequest("out of range")

// wholeNumber reads a JSON number with no fraction (120 or 120.0).
func wholeNumber(raw json.RawMessage) (int64, error) {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, errOutOfRange
	}
	return int64(f), nil
}

// optionsJSON renders a queue's effective options by their names.
func optionsJSON(cfg wire.QueueConfig) map[string]any {
	out := make(map[string]any, len(queueOptions))
	for i := range queueOptions {
		switch f := queueOptions[i].field(&cfg).(type) {
		case *uint32:
			out[queueOptions[i].name] = *f
		case *int32:
			out[queueOptions[i].name] = *f
		case *bool:
			out[queueOptions[i].name] = *f
		case *string:
			out[queueOptions[i].name] = *f
		}
	}
	return out
}

type configureAnswer struct {
	Configured  bool           `json:"configured"`
	QueueID     string         `json:"queueId"`
	PartitionID *string        `json:"partitionId"`
	Queue       string         `json:"queue"`
	Namespace   string         `json:"namespace"`
	Task        string         `json:"task"`
	Storage     string         `json:"storage"`
	Options     map[string]any `json:"options"`
}

// configure is POST /api/v1/configure (spec §2.9): creates the queue if it
// does not exist, and merges the options given into its config; with
// "mode":"replace" every option not given goes back to its default, and an
// option given as null goes back to its default in either mode. Options
// may sit inside "options" or at the top level (inside wins when both
// name one). Unknown options are ignored, as unknown fields are everywhere.
func (s *Server) configure(ctx *fasthttp.RequestCtx) error {
	var top map[string]json.RawMessage
	tenant, err := s.tenantAndBody(ctx, &top)
	if err != nil {
		return err
	}
	cmd, err := configureCommand(tenant, top)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Configure(rctx, &cmd)
	if err != nil {
		return err
	}
	if res.Code != wire.CodeOK {
		return res.Code.Err()
	}
	writeJSON(ctx, http.StatusOK, configureAnswer{
		Configured: true, QueueID: strconv.FormatUint(res.QueueID, 10), Queue: cmd.Queue,
		Namespace: res.Namespace, Task: res.Task, Storage: "segments", Options: optionsJSON(res.Config),
	})
	return nil
}

// configureCommand validates a configure body and builds its command.
func configureCommand(tenant wire.ID, top map[string]json.RawMessage) (wire.ConfigureCmd, error) {
	cmd := wire.ConfigureCmd{Tenant: tenant, Config: wire.DefaultQueueConfig()}
	if err := jsonString(top, "queue", &cmd.Queue); err != nil {
		return cmd, err
	}
	if err := checkName("queue", cmd.Queue); err != nil {
		return cmd, err
	}
	// A label given as null goes back to the one derived from the name,
	// which is also what a queue created without labels gets.
	cmd.Namespace, cmd.Task = wire.QueueLabels(cmd.Queue)
	if _, cmd.SetNamespace = top["namespace"]; cmd.SetNamespace {
		if err := jsonString(top, "namespace", &cmd.Namespace); err != nil {
			return cmd, err
		}
	}
	if _, cmd.SetTask = top["task"]; cmd.SetTask {
		if err := jsonString(top, "task", &cmd.Task); err != nil {
			return cmd, err
		}
	}
	if len(cmd.Namespace) > nameBudget || len(cmd.Task) > nameBudget {
		return cmd, nameTooLong("namespace and task must be at most 447 bytes")
	}
	var mode string
	if err := jsonString(top, "mode", &mode); err != nil {
		return cmd, err
	}
	switch mode {
	case "", "merge":
	case "replace":
		cmd.Replace = true
	default:
		return cmd, badRequest(`mode must be "merge" or "replace"`)
	}
	var nested map[string]json.RawMessage
	if raw, ok := top["options"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &nested); err != nil {
			return cmd, badRequest("options must be an object")
		}
	}
	for i := range queueOptions {
		o := &queueOptions[i]
		raw, ok := nested[o.name]
		if !ok {
			raw, ok = top[o.name]
		}
		switch {
		case !ok:
		case isNull(raw):
			cmd.Reset |= o.bit
		default:
			if err := o.parse(raw, &cmd.Config); err != nil {
				return cmd, err
			}
			cmd.Set |= o.bit
		}
	}
	return cmd, nil
}

// jsonString reads an optional string member (null or absent leaves dst).
func jsonString(m map[string]json.RawMessage, name string, dst *string) error {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return badRequest(name + " must be a string")
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }
