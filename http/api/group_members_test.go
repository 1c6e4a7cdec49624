package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A group no Kafka coordinator recorded answers kafka:false and no
// members; a consumer-protocol assignment decodes to topics and
// partitions, anything else to nothing.
func TestGroupMembersOfAGroupWithoutKafkaMembers(t *testing.T) {
	n := startNode(t)
	var ans groupMembersAnswer
	if code := getJSON(t, n.url+"/api/v1/consumer-groups/http-only/members", &ans); code != http.StatusOK {
		t.Fatalf("members: %d", code)
	}
	if ans.Group != "http-only" || ans.Kafka || len(ans.Members) != 0 || ans.Members == nil {
		t.Fatalf("members: %+v", ans)
	}
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "clicks", Partitions: []int32{0, 2}}}
	got := consumerAssignment(a.AppendTo(nil))
	if len(got) != 1 || got[0].Topic != "clicks" || fmt.Sprint(got[0].Partitions) != "[0 2]" {
		t.Fatalf("assignment: %+v", got)
	}
	if consumerAssignment([]byte{1}) != nil || consumerAssignment(nil) != nil {
		t.Fatal("bytes that are no assignment decoded")
	}
}
