package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeTransactionsEmptyID: an empty transactional id is no id at
// all, and Kafka's coordinator answers it INVALID_REQUEST (not
// TRANSACTIONAL_ID_NOT_FOUND or NOT_COORDINATOR: no node coordinates it),
// beside the other ids of the same request, which are answered as usual.
func TestDescribeTransactionsEmptyID(t *testing.T) {
	n := startNode(t, nil)
	resp := direct[*kmsg.DescribeTransactionsResponse](t, n.client(), describeTxnsReq("", "never-used"))
	if len(resp.TransactionStates) != 2 {
		t.Fatalf("answered %+v", resp.TransactionStates)
	}
	if st := resp.TransactionStates[0]; st.TransactionalID != "" || st.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("the empty id: %+v, want INVALID_REQUEST", st)
	}
	if st := resp.TransactionStates[1]; st.TransactionalID != "never-used" || st.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Errorf("an unknown id: %+v, want TRANSACTIONAL_ID_NOT_FOUND", st)
	}
}
