package broker

import "github.com/queen-mq/queen/storage"

// Every store these tests open checks its kept queue totals after each
// apply batch.
func init() { storage.VerifyTotals() }
