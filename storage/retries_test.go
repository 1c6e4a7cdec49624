package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// These tests replay what the proposer does when an attempt's outcome is
// unknown: the same entry proposed again, flagged as a retry. Raft may
// apply the first attempt and then the retry, or (a proposal forwarded
// through a deposed leader) the retry and then the first attempt.

// entryOf is one entry carrying a single command, as the proposer builds it.
func (h *harness) entryOf(kind wire.Kind, body []byte) []byte {
	return wire.AppendEntry(nil, h.now, []wire.Command{{Kind: kind, Body: body}})
}

func TestRetriedAutoAckPopReturnsTheFirstAttemptsBatch(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2", "3", "4")
	c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 2, SubMode: wire.SubAll, CommitOnDelivery: true}
	entry := h.entryOf(wire.KindPop, c.Encode(nil))
	first, _ := wire.DecodePopResult(h.applyEntry(entry))
	retry, _ := wire.DecodePopResult(h.applyEntry(wire.MarkRetry(entry)))
	if fmt.Sprint(span(first)) != "[[0 2]]" || fmt.Sprint(span(retry)) != fmt.Sprint(span(first)) {
		t.Fatalf("the retry must answer the batch its first attempt consumed: first %v, retry %v", span(first), span(retry))
	}
	// Nothing was consumed twice: the next pop continues after the batch.
	if next := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 10, SubMode: wire.SubAll, CommitOnDelivery: true}); fmt.Sprint(span(next)) != "[[2 4]]" {
		t.Fatalf("next pop: %v", span(next))
	}
}

func TestDelayedOriginalAfterItsRetryIsNotAppliedAgain(t *testing.T) {
	h := newHarness(t)
	h.alloc("q", "p")
	recs := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: h.nextID(), Payload: []byte("x")})
	push := wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: "p", PartitionIndex: -1,
		Flags: wire.PushIndexTxn, Count: 1, Records: recs}
	entry := h.entryOf(wire.KindPush, push.Encode(nil))
	if r, _ := wire.DecodePushResult(h.applyEntry(wire.MarkRetry(entry))); r.Code != wire.CodeOK || r.BaseOffset != 0 {
		t.Fatalf("retry: %+v", r)
	}
	h.applyEntry(entry) // the first attempt, late
	p, _ := h.s.PartitionByName(wire.DefaultTenant, "q", "p")
	if p.HighWatermark() != 1 {
		t.Fatalf("the late first attempt stored the message again: high-water mark %d, want 1", p.HighWatermark())
	}

	// The same holds for an auto-ack pop: the late original consumes nothing.
	h.push("q", "p", "2", "3")
	pop := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 1, SubMode: wire.SubAll, CommitOnDelivery: true}
	entry = h.entryOf(wire.KindPop, pop.Encode(nil))
	h.applyEntry(wire.MarkRetry(entry))
	h.applyEntry(entry)
	if next := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 10, SubMode: wire.SubAll, CommitOnDelivery: true}); fmt.Sprint(span(next)) != "[[1 3]]" {
		t.Fatalf("the late first attempt consumed a batch nobody received: next pop %v, want [[1 3]]", span(next))
	}
}

func TestRetriedDeleteLeavesAQueueCreatedSince(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "old")
	del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "q"}
	entry := h.entryOf(wire.KindDeleteQueue, del.Encode(nil))
	if c, _ := wire.ResultCode(h.applyEntry(entry)); c != wire.CodeOK {
		t.Fatalf("delete: %v", c)
	}
	h.push("q", "p", "new")
	if c, _ := wire.ResultCode(h.applyEntry(wire.MarkRetry(entry))); c != wire.CodeOK {
		t.Fatalf("retried delete answers its first attempt's code: %v", c)
	}
	if _, ok := h.s.Queue(wire.DefaultTenant, "q"); !ok {
		t.Fatal("the retried delete removed the queue created after it")
	}

	// A Kafka topic delete likewise.
	h.allocTopic("t", 1)
	delTopic := wire.DeleteTopicCmd{Tenant: wire.DefaultTenant, Name: "t"}
	entry = h.entryOf(wire.KindKafkaDeleteTopic, delTopic.Encode(nil))
	if c, _ := wire.ResultCode(h.applyEntry(entry)); c != wire.CodeOK {
		t.Fatalf("delete topic: %v", c)
	}
	h.allocTopic("t", 1)
	h.applyEntry(wire.MarkRetry(entry))
	if _, ok := h.s.Queue(wire.DefaultTenant, "t"); !ok {
		t.Fatal("the retried topic delete removed the topic created after it")
	}
}

func TestRetriedPositionCommitNeverMovesBack(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2", "3", "4", "5", "6", "7", "8")
	c := wire.CommitPositionCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", PartitionIndex: 0, Offset: 3}
	entry := h.entryOf(wire.KindCommitPosition, c.Encode(nil))
	h.applyEntry(entry)
	if code := h.commit("q", "g", 0, 7, ""); code != wire.CodeOK {
		t.Fatal(code)
	}
	if code, _ := wire.ResultCode(h.applyEntry(wire.MarkRetry(entry))); code != wire.CodeOK {
		t.Fatalf("retried commit: %v", code)
	}
	if got := h.s.GroupPositions(wire.DefaultTenant, "g", "q"); len(got) != 1 || got[0].Offset != 7 {
		t.Fatalf("the retried commit moved the position back: %+v, want offset 7", got)
	}
}

// A seek is a position write too: its retry, applied after more messages
// arrived, must not skip them.
func TestRetriedSeekToEndSkipsNothingPushedSince(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2")
	seek := wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", ToEnd: true}
	entry := h.entryOf(wire.KindSeek, seek.Encode(nil))
	h.applyEntry(entry)
	h.push("q", "p", "3")
	h.applyEntry(wire.MarkRetry(entry))
	if r := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 10, SubMode: wire.SubAll, CommitOnDelivery: true}); fmt.Sprint(span(r)) != "[[2 3]]" {
		t.Fatalf("the retried seek skipped a message pushed after it: pop %v, want [[2 3]]", span(r))
	}
}

func TestRetryMemorySurvivesReopenAndExpires(t *testing.T) {
	h := newHarness(t)
	h.push("q", "p", "1", "2", "3")
	pop := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 1, SubMode: wire.SubAll, CommitOnDelivery: true}
	popEntry := h.entryOf(wire.KindPop, pop.Encode(nil))
	h.applyEntry(popEntry)
	del := wire.DeleteQueueCmd{Tenant: wire.DefaultTenant, Queue: "gone"}
	delEntry := h.entryOf(wire.KindDeleteQueue, del.Encode(nil))
	h.applyEntry(wire.MarkRetry(delEntry))

	// What a replica that restarts (or installs a snapshot) rebuilds.
	h.s.Close()
	h.open()
	if len(h.s.retried) != 1 || !h.s.hasReplies {
		t.Fatalf("after reopen: retried %v, replies %v", h.s.retried, h.s.hasReplies)
	}
	if r, _ := wire.DecodePopResult(h.applyEntry(wire.MarkRetry(popEntry))); fmt.Sprint(span(r)) != "[[0 1]]" {
		t.Fatalf("retry after reopen: %v", span(r))
	}

	// Past the window a tick forgets both.
	h.now += wire.RememberRetriesMs + retriesIntervalMs
	h.applyEntry(wire.AppendEntry(nil, h.now, []wire.Command{{Kind: wire.KindTick}}))
	if len(h.s.retried) != 0 || h.s.hasReplies || h.hasTagged(tagReply) || h.hasTagged(tagRetried) {
		t.Fatalf("kept past the window: retried %v, replies %v", h.s.retried, h.s.hasReplies)
	}
	if h.s.TickDue(h.now + retriesIntervalMs) {
		t.Fatal("a tick is still due with nothing to forget")
	}
}

func (h *harness) hasTagged(tag byte) bool {
	for k := range h.dump() {
		if k[0] == tag {
			return true
		}
	}
	return false
}

// An auto-ack pop over several partitions consumes them in one entry; its
// retry answers every claim of that entry and consumes nothing more.
func TestRetriedMultiPartitionAutoAckPopConsumesOnce(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.push("q", fmt.Sprintf("p%d", i), "m")
	}
	c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", Batch: 10, SubMode: wire.SubAll,
		CommitOnDelivery: true, MaxPartitions: 3}
	entry := h.entryOf(wire.KindPop, c.Encode(nil))
	first, _ := wire.DecodePopResult(h.applyEntry(entry))
	retry, _ := wire.DecodePopResult(h.applyEntry(wire.MarkRetry(entry)))
	if len(first.Claims) != 3 || fmt.Sprint(first.Claims) != fmt.Sprint(retry.Claims) {
		t.Fatalf("first %+v, retry %+v: want the same 3 claims", first.Claims, retry.Claims)
	}
	rest := h.popWith(wire.PopCmd{Queue: "q", Group: "g", Batch: 10, SubMode: wire.SubAll, CommitOnDelivery: true, MaxPartitions: 64})
	if len(rest.Claims) != 2 {
		t.Fatalf("after the retry %d partitions were left, want 2: %+v", len(rest.Claims), rest.Claims)
	}
}
