package e2etest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Acked remembers every message a push acknowledged: transaction id →
// where it was stored.
type Acked struct {
	mu sync.Mutex
	m  map[string]ackedAt
}

// NewAcked is an empty Acked.
func NewAcked() *Acked { return &Acked{m: map[string]ackedAt{}} }

// ackedAt is where a push stored a message.
type ackedAt struct {
	partition string
	offset    uint64
}

// Add records that txn was stored at partition/offset; an error if it
// was acknowledged before at another place.
func (a *Acked) Add(txn, partition string, offset uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.m[txn]; ok && prev != (ackedAt{partition, offset}) {
		return fmt.Errorf("%s acknowledged twice at different places: %v and %s/%d", txn, prev, partition, offset)
	}
	a.m[txn] = ackedAt{partition, offset}
	return nil
}

// Len is how many messages were acknowledged.
func (a *Acked) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}

// PushUntilAcked pushes one batch, retrying the same transaction ids (so a
// retry can never store a message twice) until it is acknowledged or ctx
// ends.
func PushUntilAcked(ctx context.Context, nodes func() string, items []PushItem, a *Acked) error {
	for {
		res, code, err := Push(ctx, nodes(), items)
		if err == nil && code == http.StatusCreated {
			for i, r := range res {
				if r.Status != "queued" && r.Status != "duplicate" {
					return fmt.Errorf("item %d: %+v", i, r)
				}
				if err := a.Add(items[i].TransactionID, items[i].Partition, r.Offset); err != nil {
					return err
				}
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond) // back off before retrying a refused write
	}
}

// VerifyLog checks one node's copy of a partition against what was
// acknowledged: every acked message at its offset, no transaction id twice,
// offsets dense.
func VerifyLog(t *testing.T, ctx context.Context, base, queue, partition string, a *Acked) []FetchRecord {
	t.Helper()
	recs, hwm, err := FetchAll(ctx, base, queue, partition)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(recs)) != hwm {
		t.Fatalf("%s %s/%s: %d records below high-water mark %d", base, queue, partition, len(recs), hwm)
	}
	seen := map[string]uint64{}
	for i, r := range recs {
		if r.Offset != uint64(i) {
			t.Fatalf("%s/%s: record %d has offset %d", queue, partition, i, r.Offset)
		}
		if prev, dup := seen[r.TransactionID]; dup {
			t.Fatalf("%s/%s: %s stored twice, at %d and %d", queue, partition, r.TransactionID, prev, r.Offset)
		}
		seen[r.TransactionID] = r.Offset
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for txn, at := range a.m {
		if at.partition != partition {
			continue
		}
		if off, ok := seen[txn]; !ok || off != at.offset {
			t.Fatalf("%s: acknowledged %s at %s/%d, found at %d (present=%v)", base, txn, partition, at.offset, off, ok)
		}
	}
	return recs
}
