package api

import (
	"errors"
	"testing"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/wire"
)

// Commands placed in different raft groups commit independently: an item
// whose group could not commit its command is answered status "error"
// with the reason, the others as queued (spec §2.4 allows per-item
// failure).
func TestPushAnswersAnItemItsGroupDidNotCommitAsError(t *testing.T) {
	items := []pushItem{{Queue: "q", Partition: "a"}, {Queue: "q", Partition: "b"}, {Queue: "q", Partition: "a"}}
	placed := []itemPlace{{cmd: 0, rec: 0}, {cmd: 1, rec: 0}, {cmd: 0, rec: 1}}
	ids := []wire.ID{{1}, {2}, {3}}
	results := []raftgroups.PushOutcome{
		{PushResult: wire.PushResult{Code: wire.CodeOK, BaseOffset: 7}},
		{Err: errors.New("group 2 has no leader")},
	}
	out := pushAnswers(items, placed, ids, results)
	if out[0].Status != "queued" || *out[0].Offset != 7 || out[2].Status != "queued" || *out[2].Offset != 8 {
		t.Fatalf("committed items: %+v %+v", out[0], out[2])
	}
	if out[1].Status != "error" || out[1].Error != "group 2 has no leader" || out[1].Offset != nil || out[1].MessageID != "" {
		t.Fatalf("item of the failed group: %+v", out[1])
	}
}
