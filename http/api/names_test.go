package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestNamesRefuseInvisibleAndPathCharacters: a name is shown in listings,
// logs and dashboards and travels in URL paths. Bidi overrides make it
// display as another name, C1 controls (NEL) break lines, and a '/' makes
// a queue that no path can name again (a/b could not be deleted).
func TestNamesRefuseInvisibleAndPathCharacters(t *testing.T) {
	for _, bad := range []string{
		"a/b", "/lead", "trail/",
		"pay\u202eslip", "x\u202a", "\u2066iso\u2069", "rtl\u200fmark", "\u061cal",
		"line\u0085next", "c1\u009b", "sep\u2028x", "par\u2029x",
		"zero\u200bwidth", "bom\ufeff", "tab\tname", "del\x7f",
	} {
		if err := checkName("queue", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"orders", "billing.invoice.v1", "a-b_c:d", "ünïcödé", "注文", "emoji👩\u200d💻", "فارسی\u200cمتن", "a b"} {
		if err := checkName("queue", good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}

func TestBadNamesOverHTTPChangeNothing(t *testing.T) {
	n := startNode(t)
	for _, body := range []string{
		`{"items":[{"queue":"a/b","payload":1}]}`,
		`{"items":[{"queue":"ok","partition":"p/q","payload":1}]}`,
		`{"items":[{"queue":"pay\u202eslip","payload":1}]}`,
		`{"items":[{"queue":"nel\u0085","payload":1}]}`,
	} {
		if code, ans := call(t, "POST", n.url+"/api/v1/push", "", body); code != http.StatusBadRequest || !strings.Contains(ans, `"code":"bad_request"`) {
			t.Errorf("push %s: %d %s", body, code, ans)
		}
	}
	if code, ans := call(t, "GET", n.url+"/api/v1/pop/queue/ok?consumerGroup="+url.QueryEscape("g/h"), "", ""); code != http.StatusBadRequest {
		t.Errorf("pop with group g/h: %d %s", code, ans)
	}
	if code, ans := call(t, "GET", n.url+"/api/v1/resources/queues", "", ""); code != http.StatusOK || strings.Contains(ans, `"name"`) {
		t.Fatalf("refused pushes created queues: %d %s", code, ans)
	}
}
