package faults

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/queen-mq/queen/e2e/e2etest"
)

// ledger is the clients' own record of a fault run: what each client sent,
// what the cluster acknowledged, what consumers were handed and what their
// acks answered. Contradictions that are visible at once (an offset that
// served two values, an ack that succeeded twice) are noted as they
// happen; the rest is judged against the logs at the end
// (fault_check_test.go).
type ledger struct {
	mu sync.Mutex

	// Kafka: value → what it is, where it was acknowledged, why it failed,
	// how often a group member consumed it; and what each offset served.
	ksent     map[string]kRec
	kacked    map[string]kPos
	kfailed   map[string]string
	kconsumed map[string]int
	kseenAt   map[kPos]string

	// HTTP: transaction id → what it is, where it was acknowledged;
	// pushes whose outcome nobody heard; deliveries and ack outcomes.
	hsent       map[string]hRec
	hacked      map[string]hPos
	hunacked    map[string]bool
	hdeliv      map[string]int
	hackOK      map[string]int
	hackNoop    map[string]int
	hackUnknown map[string]int
	hseenAt     map[hPos]string
	hnext       map[string]uint64 // partition → offset after the highest first delivery

	problems []string
	reorders int // first deliveries out of offset order (counted with the logs' reorders)
}

type kRec struct {
	producer, seq int
	partition     int32
}

type kPos struct {
	partition int32
	offset    int64
}

type hRec struct {
	pusher, seq int
	partition   string
}

type hPos struct {
	partition string
	offset    uint64
}

func newFaultLedger() *ledger {
	return &ledger{
		ksent: map[string]kRec{}, kacked: map[string]kPos{}, kfailed: map[string]string{},
		kconsumed: map[string]int{}, kseenAt: map[kPos]string{},
		hsent: map[string]hRec{}, hacked: map[string]hPos{}, hunacked: map[string]bool{},
		hdeliv: map[string]int{}, hackOK: map[string]int{}, hackNoop: map[string]int{},
		hackUnknown: map[string]int{}, hseenAt: map[hPos]string{},
		hnext: map[string]uint64{},
	}
}

// problem notes a contradiction; the caller holds mu.
func (l *ledger) problem(format string, args ...any) {
	if len(l.problems) < 1000 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

func (l *ledger) kSent(val string, producer, seq int, p int32) {
	l.mu.Lock()
	l.ksent[val] = kRec{producer, seq, p}
	l.mu.Unlock()
}

func (l *ledger) kResult(val string, p int32, off int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.kfailed[val] = err.Error()
		return
	}
	at := kPos{p, off}
	if prev, ok := l.kacked[val]; ok && prev != at {
		l.problem("kafka %s acknowledged at %d/%d and at %d/%d", val, prev.partition, prev.offset, p, off)
	}
	l.kacked[val] = at
}

func (l *ledger) kConsumed(p int32, off int64, val string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := kPos{p, off}
	if prev, ok := l.kseenAt[at]; ok && prev != val {
		l.problem("kafka %d/%d served %q and later %q", p, off, prev, val)
	}
	l.kseenAt[at] = val
	l.kconsumed[val]++
	if a, ok := l.kacked[val]; ok && a != at {
		l.problem("kafka %s acknowledged at %d/%d, consumed at %d/%d", val, a.partition, a.offset, p, off)
	}
}

func (l *ledger) hSent(txn string, pusher, seq int, part string) {
	l.mu.Lock()
	l.hsent[txn] = hRec{pusher, seq, part}
	l.mu.Unlock()
}

func (l *ledger) hAcked(txn, part string, off uint64, node int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := hPos{part, off}
	if prev, ok := l.hacked[txn]; ok && prev != at {
		l.problem("http %s acknowledged at %s/%d and at %s/%d (node %d)", txn, prev.partition, prev.offset, part, off, node)
	}
	l.hacked[txn] = at
}

func (l *ledger) hUnacked(items []e2etest.PushItem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range items {
		if _, ok := l.hacked[it.TransactionID]; !ok {
			l.hunacked[it.TransactionID] = true
		}
	}
}

// hDelivered records a pop's messages: each must be what was pushed under
// its transaction id, at the offset its push was acknowledged at, and a
// partition's first deliveries come in offset order (a message delivered
// for the first time below one already delivered was skipped).
func (l *ledger) hDelivered(node int, msgs []e2etest.PopMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		at := hPos{m.Partition, m.Offset}
		if prev, ok := l.hseenAt[at]; ok && prev != m.TransactionID {
			l.problem("http %s/%d delivered %s and later %s", m.Partition, m.Offset, prev, m.TransactionID)
		}
		l.hseenAt[at] = m.TransactionID
		if a, ok := l.hacked[m.TransactionID]; ok && a != at {
			l.problem("http %s acknowledged at %s/%d, delivered at %s/%d (node %d)", m.TransactionID, a.partition, a.offset, m.Partition, m.Offset, node)
		}
		if s, ok := l.hsent[m.TransactionID]; ok && s.pusher >= 0 {
			var d struct{ W, S int }
			if err := json.Unmarshal(m.Data, &d); err != nil || d.W != s.pusher || d.S != s.seq || s.partition != m.Partition {
				l.problem("http %s delivered with data %s in %s, pushed as %+v", m.TransactionID, m.Data, m.Partition, s)
			}
		} else if !ok {
			l.problem("http %s/%d delivered %s, which nobody pushed", m.Partition, m.Offset, m.TransactionID)
		}
		l.hdeliv[m.TransactionID]++
		if l.hdeliv[m.TransactionID] == 1 {
			if next := l.hnext[m.Partition]; m.Offset < next && next > 0 {
				l.reorders++
				l.problem("http %s/%d (%s) delivered for the first time after offset %d was", m.Partition, m.Offset, m.TransactionID, next-1)
			}
			l.hnext[m.Partition] = max(l.hnext[m.Partition], m.Offset+1)
		}
	}
}

func (l *ledger) hAckAnswers(msgs []e2etest.PopMessage, res []e2etest.AckResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range res {
		txn := msgs[i].TransactionID
		// A refused ack needs no record: its lease expired, and the
		// message is delivered again.
		switch {
		case r.Success && !r.Noop:
			l.hackOK[txn]++
			if l.hackOK[txn] == 2 {
				l.problem("http %s acknowledged successfully twice", txn)
			}
		case r.Success:
			l.hackNoop[txn]++
		}
	}
}

func (l *ledger) hAckUnknown(msgs []e2etest.PopMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.hackUnknown[m.TransactionID]++
	}
}

// ackedCounts are the Kafka records and HTTP messages acknowledged so far.
func (l *ledger) ackedCounts() (kafka, http int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.kacked), len(l.hacked)
}

// drained reports whether consumers have had every acknowledged write:
// each Kafka record consumed, each HTTP message acknowledged by a consumer
// (or an ack sent whose answer was lost).
func (l *ledger) drained() (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kmiss, hmiss := 0, 0
	for v := range l.kacked {
		if l.kconsumed[v] == 0 {
			kmiss++
		}
	}
	for txn := range l.hacked {
		if l.hackOK[txn]+l.hackNoop[txn]+l.hackUnknown[txn] == 0 {
			hmiss++
		}
	}
	return kmiss == 0 && hmiss == 0, fmt.Sprintf("%d Kafka records not consumed, %d HTTP messages not acknowledged by a consumer", kmiss, hmiss)
}
