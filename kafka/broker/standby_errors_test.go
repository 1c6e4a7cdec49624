package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-mq/queen/raftgroups"
)

// TestStandbyRefusalIsNotLeader: a standby's refused produce is
// NOT_LEADER_OR_FOLLOWER (retriable: clients refresh metadata and retry,
// which succeeds once promoted); its refused offset commit NOT_COORDINATOR.
func TestStandbyRefusalIsNotLeader(t *testing.T) {
	err := fmt.Errorf("produce: %w", raftgroups.ErrStandby)
	if got := errorCode(err); got != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce on a standby: code %d", got)
	}
	if got := coordinatorCode(err); got != kerr.NotCoordinator.Code {
		t.Fatalf("offset commit on a standby: code %d", got)
	}
}
