package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/queen-mq/queen/wire"
)

// TestOpenKafkaTransactionsAreListed (issue 33 item 9): an open Kafka
// transaction holds back HTTP pops of its partitions, and nothing showed
// which one. GET /api/v1/resources/transactions lists the tenant's open
// transactions with their producer, start and timeout, for the dashboard.
func TestOpenKafkaTransactionsAreListed(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var listed struct {
		Transactions []txnView `json:"transactions"`
		Total        int       `json:"total"`
	}
	if code := getJSON(t, n.url+"/api/v1/resources/transactions", &listed); code != http.StatusOK || len(listed.Transactions) != 0 {
		t.Fatalf("no transactions yet: %d %+v", code, listed)
	}
	ini, err := n.engine.InitProducer(ctx, &wire.InitProducerCmd{Tenant: wire.DefaultTenant, Transactional: true,
		TxnID: "orders-tx", TimeoutMs: 45000, ReqID: wire.ID{7}})
	if err != nil || ini.Code != wire.CodeOK {
		t.Fatalf("init: %v %v", err, ini.Code)
	}
	g := n.engine.TenantGroups(wire.DefaultTenant)[0]
	if res, err := n.engine.TxnBegin(ctx, &wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: "orders-tx",
		ProducerID: ini.ProducerID, Epoch: ini.Epoch, Groups: 1 << g}); err != nil || res.Code != wire.CodeOK {
		t.Fatalf("begin: %v %v", err, res.Code)
	}
	if code := getJSON(t, n.url+"/api/v1/resources/transactions", &listed); code != http.StatusOK {
		t.Fatalf("GET: %d", code)
	}
	if len(listed.Transactions) != 1 || listed.Total != 1 {
		t.Fatalf("listed: %+v", listed)
	}
	tx := listed.Transactions[0]
	if tx.TransactionalID != "orders-tx" || tx.ProducerID != ini.ProducerID || tx.ProducerEpoch != ini.Epoch ||
		tx.State != "Ongoing" || tx.TimeoutMs != 45000 || tx.StartedAt == "" || tx.ExpiresAt == "" {
		t.Fatalf("transaction: %+v", tx)
	}
}
