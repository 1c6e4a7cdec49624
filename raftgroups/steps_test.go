package raftgroups

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// A seek of more partitions than one step, whose caller is gone before its
// first step applies, still walks every partition; the same request sent
// while the walk runs joins it instead of starting another, and another
// walk, running beside it, walks every partition too.
func TestAStepWalkOutlivesItsCallerAndIsJoined(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	c := newTestClusterWith(t, 1, 1, 0, func(cfg *Config) {
		cfg.BeforeApply = func(int) {
			if hold.Load() {
				<-release
			}
		}
	})
	// Runs before the hosts close (cleanups are last in, first out).
	t.Cleanup(func() {
		hold.Store(false)
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c.waitReady()
	e := c.engines[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const parts = wire.GroupStepLimit + 808
	for from := 0; from < parts; from += 1000 {
		var cmds []wire.PushCmd
		for p := from; p < min(from+1000, parts); p++ {
			id := wire.ID{0: 7, 14: byte(p >> 8), 15: byte(p)}
			id[13] = byte(p >> 16)
			rec := wire.AppendRecord(nil, &wire.Record{Flags: wire.FlagJSON, MsgID: id, Payload: []byte(`1`)})
			cmds = append(cmds, wire.PushCmd{Tenant: wire.DefaultTenant, Queue: "q", Partition: fmt.Sprintf("p%05d", p),
				PartitionIndex: -1, Flags: wire.PushIndexTxn, Count: 1, Records: rec})
		}
		out, err := e.Push(ctx, wire.DefaultTenant, cmds)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if o.Err != nil || o.Code != wire.CodeOK {
				t.Fatalf("push: %+v", o)
			}
		}
	}

	hold.Store(true)
	seek := &wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "g", ToEnd: true}
	gone, leave := context.WithCancel(ctx)
	leave()
	for range 2 {
		if _, err := e.Seek(gone, seek); !errors.Is(err, context.Canceled) {
			t.Fatalf("a seek whose caller is gone answered %v, want its context's error", err)
		}
	}
	e.walks.mu.Lock()
	walks := len(e.walks.running)
	e.walks.mu.Unlock()
	if walks != 1 {
		t.Fatalf("%d walks running, want the second request joined to the first", walks)
	}
	other := &wire.SeekCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: "other", ToEnd: true}
	if _, err := e.Seek(gone, other); !errors.Is(err, context.Canceled) {
		t.Fatalf("a second walk whose caller is gone answered %v", err)
	}
	hold.Store(false)
	close(release)
	waitFor(t, ctx, func() bool {
		e.walks.mu.Lock()
		defer e.walks.mu.Unlock()
		return len(e.walks.running) == 0
	})
	// Every partition was moved to its end, the last step's included, by
	// both walks.
	for _, group := range []string{"g", "other"} {
		res, err := e.Pop(ctx, &wire.PopCmd{Tenant: wire.DefaultTenant, Queue: "q", Group: group, Batch: 64, SubMode: wire.SubAll,
			CommitOnDelivery: true, MaxPartitions: 64})
		if err != nil || len(res.Claims) != 0 {
			t.Fatalf("after the walks a pop of %s found %d claims (%v), want none", group, len(res.Claims), err)
		}
	}
}
