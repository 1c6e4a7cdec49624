package raftgroups

import (
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// A proposal is retried only while the state machine still recognises its
// attempts (storage/retries.go), however long the request may wait.
func TestRetriesStayInsideTheWindowTheStoreRemembers(t *testing.T) {
	stamp := time.UnixMilli(1_700_000_000_000)
	if got := retryDeadline(stamp, 30*time.Second); !got.Equal(stamp.Add(30 * time.Second)) {
		t.Fatalf("short request: %v", got.Sub(stamp))
	}
	if got := retryDeadline(stamp, time.Hour); got.Sub(stamp) != wire.RetryWindowMs*time.Millisecond {
		t.Fatalf("long request: %v", got.Sub(stamp))
	}
	if wire.RememberRetriesMs < 2*wire.RetryWindowMs {
		t.Fatal("the store must remember retries well past the retry window")
	}
}
