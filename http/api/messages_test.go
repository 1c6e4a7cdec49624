package api

import (
	"fmt"
	"testing"
)

// A message is found with its own partition, whichever group holds it and
// wherever its index falls among the queue's partitions.
func TestGetMessageNamesItsOwnPartition(t *testing.T) {
	n := startNode(t)
	const parts = 12
	items := make([]map[string]any, 0, parts)
	for i := range parts {
		items = append(items, map[string]any{"queue": "many", "partition": fmt.Sprintf("p%02d", i),
			"payload": map[string]any{"i": i}, "transactionId": fmt.Sprintf("tx-%02d", i)})
	}
	if code := postJSON(t, n.url+"/api/v1/push", map[string]any{"items": items}, nil); code != 201 {
		t.Fatalf("push: %d", code)
	}
	var popped struct{ Messages []poppedMessage }
	if code := getJSON(t, fmt.Sprintf("%s/api/v1/pop/queue/many?batch=%d&partitions=%d", n.url, parts, parts), &popped); code != 200 || len(popped.Messages) != parts {
		t.Fatalf("pop: %d %+v", code, popped)
	}
	for _, p := range popped.Messages {
		var msg map[string]any
		if code := getJSON(t, n.url+"/api/v1/messages/"+p.PartitionID+"/"+p.TransactionID, &msg); code != 200 {
			t.Fatalf("message %+v: %d", p, code)
		}
		if want := "p" + p.TransactionID[len("tx-"):]; p.Partition != want || msg["partition"] != want ||
			msg["partitionId"] != p.PartitionID || msg["queuePath"] != "many/"+want || msg["transactionId"] != p.TransactionID {
			t.Fatalf("message %+v: %v", p, msg)
		}
	}
	if code := getJSON(t, n.url+"/api/v1/messages/"+popped.Messages[0].PartitionID+"/no-such-txn", nil); code != 404 {
		t.Fatalf("unknown transaction id: %d", code)
	}
}
