package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A name with spaces and non-ASCII letters is valid in a push body; in a
// route's path a client percent-encodes it, and every route with a name
// parameter reads it decoded: the queue's view, a pop of it and of its
// partition, and a KV key.
func TestPathNamesArePercentDecoded(t *testing.T) {
	n := startNode(t)
	const queue, partition = "café q", "p 1"
	if code, body := call(t, "POST", n.url+"/api/v1/push", "", `{"items":[{"queue":"café q","partition":"p 1","payload":{"a":1}},{"queue":"café q","partition":"p 1","payload":{"a":2}}]}`); code != http.StatusCreated {
		t.Fatalf("push: %d %s", code, body)
	}
	q, p := url.PathEscape(queue), url.PathEscape(partition)
	if code, body := call(t, "GET", n.url+"/api/v1/resources/queues/"+q, "", ""); code != http.StatusOK || !strings.Contains(body, `café q`) {
		t.Fatalf("queue view: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/pop/queue/"+q+"/partition/"+p+"?batch=1&autoAck=true", "", ""); code != http.StatusOK || !strings.Contains(body, `"a":1`) {
		t.Fatalf("pop of the partition: %d %s", code, body)
	}
	if code, body := call(t, "GET", n.url+"/api/v1/pop/queue/"+q+"?batch=1&autoAck=true", "", ""); code != http.StatusOK || !strings.Contains(body, `"a":2`) {
		t.Fatalf("pop of the queue: %d %s", code, body)
	}
}

// A KV key written at an encoded path is the decoded key: read back by
// the same path and listed under its own name.
func TestKVKeysInPathsArePercentDecoded(t *testing.T) {
	n := startNode(t)
	path := n.url + "/api/v1/kv/app/" + url.PathEscape("café k")
	if code, body := call(t, "PUT", path, "", `{"on":true}`); code != http.StatusOK {
		t.Fatalf("put: %d %s", code, body)
	}
	if code, body := call(t, "GET", path, "", ""); code != http.StatusOK || !strings.Contains(body, `"key":"café k"`) || !strings.Contains(body, `"found":true`) {
		t.Fatalf("get: %d %s", code, body)
	}
}
