package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A leader just elected answers OFFSET_NOT_AVAILABLE until it has caught
// up (the CLI e2e test met it on a busy machine: `queen topics describe`
// failed); listOffsets asks again, and gives up only on an error that is
// not retriable or when its context ends.
func TestListOffsetsRetriesRetriableErrors(t *testing.T) {
	answer := func(err error) kadm.ListedOffsets {
		return kadm.ListedOffsets{"t": {0: {Topic: "t", Partition: 0, Offset: 7, Err: err}}}
	}
	calls := 0
	list := func(_ context.Context, _ ...string) (kadm.ListedOffsets, error) {
		calls++
		if calls < 3 {
			return answer(kerr.OffsetNotAvailable), nil
		}
		return answer(nil), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := listOffsets(ctx, list, "t")
	if err != nil || calls != 3 {
		t.Fatalf("after %d calls: %v", calls, err)
	}
	if o, ok := offs.Lookup("t", 0); !ok || o.Offset != 7 {
		t.Fatalf("offsets: %+v", offs)
	}

	// Not retriable: answered at once.
	calls = 0
	refused := func(_ context.Context, _ ...string) (kadm.ListedOffsets, error) {
		calls++
		return answer(kerr.TopicAuthorizationFailed), nil
	}
	if _, err := listOffsets(ctx, refused, "t"); !errors.Is(err, kerr.TopicAuthorizationFailed) || calls != 1 {
		t.Fatalf("a refusal: %v after %d calls", err, calls)
	}

	// Retriable for ever: the context bounds it.
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	always := func(_ context.Context, _ ...string) (kadm.ListedOffsets, error) {
		return answer(kerr.OffsetNotAvailable), nil
	}
	if _, err := listOffsets(short, always, "t"); !errors.Is(err, kerr.OffsetNotAvailable) {
		t.Fatalf("a retriable error past the deadline: %v", err)
	}
}
