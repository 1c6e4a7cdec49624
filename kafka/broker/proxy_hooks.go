package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/records"
)

// The embedded proxy's hold on Kafka logins made with its API keys: the
// cluster's plan limits, quotas, status and metering apply to the login's
// Kafka requests as they apply to its HTTP ones (issue 33 item 1). The
// broker knows Kafka and asks the proxy's Policy only plain questions
// (how many partitions, how large a record, what a request was); the
// proxy decides with the same functions as for HTTP. A login without a
// Policy (every other login) costs one nil check per request.

// Policy is what a login's plan asks of its requests. It is called on the
// request's goroutine, for a whole request at a time (never per record),
// and must not take locks every connection shares.
type Policy interface {
	// Before runs before each request (of API key key): a non-zero code
	// refuses all of it (a cluster suspended since the login). A
	// throttled login's wait is the broker's (quoted), not Before's.
	Before(ctx context.Context, key int16) int16
	// Produce is the plan's say on one produce request: a refusal of all
	// of it (pushes blocked, a quota spent), or caps its batches meet.
	Produce() ProduceGate
	// Create checks topics about to be created or grown, in order,
	// setting Err on each refused.
	Create(asks []CreateAsk)
	// After meters an answered request and charges it to the cluster's
	// rates; it returns the throttle the answer carries (Kafka's client
	// quotas: the request is served, the client waits), which the broker
	// applies as any client quota's throttle (quoted).
	After(u Usage) time.Duration
	// Quotas are the plan's rate limits as client quota values of the
	// login's user entity: DescribeClientQuotas lists them, read-only
	// (AlterClientQuotas refuses their keys).
	Quotas() map[string]float64
	// Park takes one of the cluster's parked slots for a fetch that may
	// wait for records (max_parked_pops, as an HTTP long-poll pop); leave
	// gives it back (nil: nothing to give back). Without one (false) the
	// fetch is answered at once, with the throttle returned.
	Park() (leave func(), ok bool, throttle time.Duration)
}

// CreateAsk is one topic a CreateTopics, CreatePartitions or automatic
// creation would create (Exists false) or grow to Partitions.
type CreateAsk struct {
	Topic      string
	Partitions int
	Exists     bool
	Err        error
}

// ProduceGate is a policy's answer to one produce request.
type ProduceGate struct {
	// Refuse, when set, answers every partition.
	Refuse *PolicyError
	// MaxRecordBytes bounds one record's key, value and headers; 0: none.
	MaxRecordBytes int
	// MaxBatchRecords bounds the records of one batch; 0: none.
	MaxBatchRecords int
}

// PolicyError is a policy's refusal with the Kafka code it answers.
type PolicyError struct {
	Code int16
	Msg  string
}

func (e *PolicyError) Error() string { return e.Msg }

// Usage is what one answered request was, for metering and rates.
type Usage struct {
	Key   int16
	Class UsageClass
	// Refused: every part of it was answered an error.
	Refused bool
	// Records are those appended (produce) or handed out (fetch); Bytes
	// the record batches' bytes in and out.
	Records  int
	BytesIn  int
	BytesOut int
}

// UsageClass is the proxy's route class a Kafka request meters as.
type UsageClass uint8

const (
	UsageRead    UsageClass = iota // metadata, offsets, groups, descriptions
	UsageProduce                   // Produce
	UsageFetch                     // Fetch, ShareFetch
	UsageAdmin                     // topic and group administration
	UsageTxn                       // transaction coordination
)

type policyKey struct{}

// policyOf is the policy of the login a request came on, if any.
func policyOf(ctx context.Context) Policy {
	p, _ := ctx.Value(policyKey{}).(Policy)
	return p
}

// policed runs a login's policy around its requests: before (status), a
// parked slot for a fetch that may wait, and the policy in the context
// for the handlers (caps, produce gate). The plan's rates are charged and
// its throttle applied by quoted (client_quota_throttle.go), the one
// throttling path client quotas take too.
func policed(key int16, h kafka.Handler) kafka.Handler {
	return func(ctx context.Context, c *kafka.Conn, req kmsg.Request) (kmsg.Response, error) {
		id, ok := identityOf(c)
		if !ok || id.Policy == nil {
			return h(ctx, c, req)
		}
		pol := id.Policy
		if code := pol.Before(ctx, key); code != 0 {
			return kafka.ErrorResponse(req, code), nil
		}
		if wait := waitOf(req); wait != nil && *wait > 0 {
			leave, ok, throttle := pol.Park()
			if !ok {
				*wait = 0 // answered with what there is now, throttled
				ctx = context.WithValue(ctx, requestQuotaKey{}, &requestQuota{planParked: throttle})
			} else if leave != nil {
				defer leave()
			}
		}
		return h(context.WithValue(ctx, policyKey{}, pol), c, req)
	}
}

// waitOf is how long a fetch may wait for records, nil for requests that
// never wait.
func waitOf(req kmsg.Request) *int32 {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		return &r.MaxWaitMillis
	case *kmsg.ShareFetchRequest:
		return &r.MaxWaitMillis
	}
	return nil
}

// usageOf reads what an answered request was: its class, whether it was
// refused whole, and for produce and fetch its records and bytes (from
// the batch headers: no record is decoded again).
func usageOf(key int16, req kmsg.Request, resp kmsg.Response) Usage {
	u := Usage{Key: key, Class: UsageRead}
	switch kmsg.Key(key) {
	case kmsg.Produce:
		u.Class = UsageProduce
		pr, ok := req.(*kmsg.ProduceRequest)
		r, rok := resp.(*kmsg.ProduceResponse)
		if !ok || !rok || len(pr.Topics) != len(r.Topics) {
			return u
		}
		parts, good := 0, 0
		for ti := range pr.Topics {
			ps, answers := pr.Topics[ti].Partitions, r.Topics[ti].Partitions
			for pi := range ps {
				parts++
				if pi < len(answers) && answers[pi].ErrorCode == 0 {
					good++
					n, size := batchRecords(ps[pi].Records)
					u.Records += n
					u.BytesIn += size
				}
			}
		}
		u.Refused = parts > 0 && good == 0
	case kmsg.Fetch:
		u.Class = UsageFetch
		if r, ok := resp.(*kmsg.FetchResponse); ok {
			u.Refused = r.ErrorCode != 0
			for ti := range r.Topics {
				for pi := range r.Topics[ti].Partitions {
					n, size := batchRecords(r.Topics[ti].Partitions[pi].RecordBatches)
					u.Records += n
					u.BytesOut += size
				}
			}
		}
	case kmsg.ShareFetch:
		u.Class = UsageFetch
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.DeleteRecords, kmsg.CreatePartitions, kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs,
		kmsg.DeleteGroups, kmsg.OffsetDelete, kmsg.DeleteShareGroupOffsets:
		u.Class = UsageAdmin
	case kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit:
		u.Class = UsageTxn
	}
	return u
}

// producePolicy is the gate of the produce request ctx carries; the zero
// gate without a policy.
func producePolicy(ctx context.Context) ProduceGate {
	if pol := policyOf(ctx); pol != nil {
		return pol.Produce()
	}
	return ProduceGate{}
}

// check applies the gate's caps to one partition's decoded batches:
// MESSAGE_TOO_LARGE for a record over the payload cap, as Kafka answers a
// record over message.max.bytes, and RECORD_LIST_TOO_LARGE for a batch of
// more records than a push may carry.
func (g ProduceGate) check(batches []records.Batch) error {
	if g.MaxRecordBytes <= 0 && g.MaxBatchRecords <= 0 {
		return nil
	}
	for i := range batches {
		b := &batches[i]
		if g.MaxBatchRecords > 0 && len(b.Records) > g.MaxBatchRecords {
			return &PolicyError{Code: kerr.RecordListTooLarge.Code, Msg: "a batch holds more records than the cluster's plan lets a push carry (max_items_per_push)"}
		}
		if g.MaxRecordBytes <= 0 || b.InflatedSize <= g.MaxRecordBytes {
			continue // no record of it can be larger than all of them
		}
		for j := range b.Records {
			if recordBytes(&b.Records[j]) > g.MaxRecordBytes {
				return &PolicyError{Code: kerr.MessageTooLarge.Code, Msg: "a record is larger than the cluster's plan allows (max_payload_bytes)"}
			}
		}
	}
	return nil
}

// recordBytes is a record's payload as the plan counts it: key, value and
// headers.
func recordBytes(r *records.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// refuseAllProduce answers every partition of req with e.
func refuseAllProduce(resp *kmsg.ProduceResponse, req *kmsg.ProduceRequest, e *PolicyError) {
	msg := e.Msg
	answerEveryPartition(resp, req, e.Code, &msg)
}

// policyCreate asks the request's policy about topics to create or grow
// (asks in request order); no policy passes them all.
func policyCreate(ctx context.Context, asks []CreateAsk) {
	if pol := policyOf(ctx); pol != nil && len(asks) > 0 {
		pol.Create(asks)
	}
}

// policyCode is a policy refusal's Kafka code, false for other errors.
// Refusals travel unwrapped, so a type assertion finds them.
func policyCode(err error) (int16, bool) {
	if pe, ok := err.(*PolicyError); ok {
		return pe.Code, true
	}
	return 0, false
}
