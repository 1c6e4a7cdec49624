package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/queen-mq/queen/raftgroups"
)

// TestStandbyErrorsMapOnce: a write refused by a standby is 503 "standby",
// wrapped or not; a promotion of a cluster that follows nothing is 409.
func TestStandbyErrorsMapOnce(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{raftgroups.ErrStandby, http.StatusServiceUnavailable, "standby"},
		{fmt.Errorf("push: %w", raftgroups.ErrStandby), http.StatusServiceUnavailable, "standby"},
		{raftgroups.ErrNotStandby, http.StatusConflict, "not_standby"},
	} {
		if status, code, _ := errorStatus(c.err); status != c.status || code != c.code {
			t.Errorf("%v: %d %s, want %d %s", c.err, status, code, c.status, c.code)
		}
	}
}

// The promote route is an operator route: on a node that follows nothing
// it answers 409 not_standby, which shows its handler ran and changed
// nothing.
func init() {
	operatorCalls = append(operatorCalls, routeCall{"POST", "/api/v1/system/standby/promote", "", http.StatusConflict})
}
