package storage

// Every test of this package checks, after each apply batch, that the
// queue totals kept as partitions change equal a full recount.
func init() { verifyTotals = true }
