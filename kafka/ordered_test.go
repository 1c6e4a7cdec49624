package kafka

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Turns of one key go in the order they were taken, whatever order their
// holders arrive in; turns given up (handlers that return without taking
// theirs) do not block the ones after them.
func TestTurnsKeepDispatchOrder(t *testing.T) {
	var table turnTable
	const n = 200
	turns := make([]*turn, n)
	for i := range turns {
		turns[i] = table.take(0)
	}
	other := table.take(1) // another key has its own line
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := other.wait(ctx); err != nil {
		t.Fatal("a line of another key waited:", err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i, tr := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
			if i%7 == 3 {
				tr.finish() // returned early, never took its turn
				return
			}
			if err := tr.wait(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			tr.finish()
			tr.finish() // idempotent
		}()
	}
	wg.Wait()
	for k := 1; k < len(order); k++ {
		if order[k] < order[k-1] {
			t.Fatalf("turn %d ran after %d", order[k], order[k-1])
		}
	}
	if len(order) != n-n/7-1 {
		t.Fatalf("%d turns ran", len(order))
	}
	// A waiter gives up when its context ends.
	blocked := table.take(0)
	stuck := table.take(0)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	if err := stuck.wait(short); err == nil {
		t.Fatal("waited past an unfinished turn")
	}
	blocked.finish()
	if err := stuck.wait(ctx); err != nil {
		t.Fatal(err)
	}
}
