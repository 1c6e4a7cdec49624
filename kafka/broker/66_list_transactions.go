package broker

import (
	"context"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/storage"
)

// handleListTransactions (key 66, v0-2, KIP-664) lists the transactional
// ids this node coordinates, open or not, with their producer ids and
// states (txnStateOf); clients ask every node and merge the answers, as
// with Kafka. A coordinator just elected that has not caught up with its
// raft group answers COORDINATOR_LOAD_IN_PROGRESS. The filters are
// Kafka's: states (case-sensitive; unknown names are answered in
// UnknownStateFilters and match nothing), producer ids, v1's duration (only
// transactions that began longer ago than that) and v2's transactional id
// pattern (RE2, matching the whole id). A login that may not describe
// transactional ids gets an empty list, as Kafka leaves out the ids a
// principal may not describe.
func (b *Broker) handleListTransactions(_ context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	if !mayDescribeTxns(c) {
		return resp, nil
	}
	tenant := b.tenantOf(c)
	states := map[string]bool{}
	for _, s := range req.StateFilters {
		if txnStates[s] {
			states[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if pattern, err = regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
	}
	for _, g := range b.engine.TenantGroups(tenant) {
		if _, leads, caughtUp := b.engine.LeaderEpoch(g); leads && !caughtUp {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp, nil
		}
	}
	nowMs := b.engine.NowMs()
	wanted := func(info storage.TxnInfo, state string) bool {
		switch {
		case len(req.StateFilters) > 0 && !states[state]:
			return false
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, info.ProducerID):
			return false
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && nowMs-txnStartMs(info) <= req.DurationFilterMillis:
			return false
		}
		return pattern == nil || pattern.MatchString(info.TxnID)
	}
	for _, info := range b.engine.LedTxns(tenant) {
		if state := txnStateOf(info); wanted(info, state) {
			ts := kmsg.NewListTransactionsResponseTransactionState()
			ts.TransactionalID, ts.ProducerID, ts.TransactionState = info.TxnID, info.ProducerID, state
			resp.TransactionStates = append(resp.TransactionStates, ts)
		}
	}
	return resp, nil
}
