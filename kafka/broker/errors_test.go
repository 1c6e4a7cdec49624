package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
)

// Storage failures reach clients as KAFKA_STORAGE_ERROR, never as data or
// as an unknown server error, however deeply they are wrapped.
func TestStorageFailuresAreStorageErrors(t *testing.T) {
	for _, err := range []error{raftgroups.ErrStorageFull, storage.ErrCorrupt} {
		wrapped := fmt.Errorf("fetch partition 3: %w", err)
		if got := errorCode(wrapped); got != kerr.KafkaStorageError.Code {
			t.Errorf("%v: code %d, want KAFKA_STORAGE_ERROR", err, got)
		}
	}
}
