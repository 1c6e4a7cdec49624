package proxy

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

func TestQueueAndPartitionCaps(t *testing.T) {
	p, _ := testProxy(t, Config{})
	tenant, _ := wire.ParseID(uuid.NewString())
	// Two queues, q1 with partitions a and b, q2 with Default, pushed
	// through the broker's handler.
	p.broker = api.New(api.Config{}, p.engine, raftgroupstest.Quiet).Handler()
	body := `{"items":[{"queue":"q1","partition":"a","payload":1},{"queue":"q1","partition":"b","payload":1},{"queue":"q2","payload":1}]}`
	if code, out := p.brokerCall("POST", "/api/v1/push", tenant, []byte(body)); code != 201 {
		t.Fatalf("push: %d %s", code, out)
	}
	lim := Limits{LimitMaxQueues: n(3), LimitMaxPartitions: n(2)}
	now := time.Now()
	cases := []struct {
		body string
		want error
	}{
		{`{"items":[{"queue":"q3","partition":"x"}]}`, nil},
		{`{"items":[{"queue":"q3"},{"queue":"q4"}]}`, errQueueLimit},
		{`{"items":[{"queue":"q2","partition":"Default"}]}`, nil},
		{`{"items":[{"queue":"q2","partition":"p1"}]}`, nil},
		{`{"items":[{"queue":"q2","partition":"p1"},{"queue":"q2","partition":"p2"}]}`, errPartitionLimit},
		{`{"items":[{"queue":"q1","partition":"a"},{"queue":"q1","partition":"b"}]}`, nil},
		{`{"items":[{"queue":"q1","partition":"c"}]}`, errPartitionLimit},
		{`{"items":[{"queue":"q5","partition":"1"},{"queue":"q5","partition":"2"},{"queue":"q5","partition":"3"}]}`, errPartitionLimit},
	}
	for _, c := range cases {
		if got := p.census.overCaps(tenant, targetsOf(c.body), lim, now); !errors.Is(got, c.want) && got != c.want {
			t.Errorf("%s: %v, want %v", c.body, got, c.want)
		}
	}
	if got := p.census.overCaps(tenant, configureTarget([]byte(`{"queue":"new"}`)), Limits{LimitMaxQueues: n(2)}, now); got != errQueueLimit {
		t.Errorf("configure of a third queue over 2: %v", got)
	}
	if got := p.census.overCaps(tenant, configureTarget([]byte(`{"queue":"q1"}`)), Limits{LimitMaxQueues: n(2)}, now); got != nil {
		t.Errorf("configure of an existing queue: %v", got)
	}
}

// targetsOf reads a push body's targets as the broker shows them.
func targetsOf(body string) []queueTarget {
	var req struct {
		Items []api.PushItem `json:"items"`
	}
	_ = json.Unmarshal([]byte(body), &req)
	for i := range req.Items {
		if req.Items[i].Partition == "" {
			req.Items[i].Partition = "Default"
		}
	}
	return pushTargets(req.Items)
}
