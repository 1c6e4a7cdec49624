// Package e2etest is what the end-to-end test packages (e2e/http,
// e2e/kafka, e2e/cluster, e2e/faults, e2e/ops) share, and only that:
//
//   - Main, every package's TestMain: the queen binary of this checkout,
//     built once for all the packages a go test run starts side by side
//     (harness.SharedBuild);
//   - starting real nodes for a test and stopping them when it ends
//     (StartCluster, StartPreparedCluster) and bounding it (Deadline);
//   - clients of a node's HTTP port (Call, Push, Pop, FetchAll, Client,
//     the answers' types), of its Kafka port through franz-go (KgoClient,
//     KafkaClient, KafkaRequest, ConsumeN, ...), and readers of what it
//     reports (its health and placement, Prometheus metrics).
//
// A helper that one theme's tests use stays in that theme's package. This
// package has no tests and checks nothing on its own: it fails the test it
// is given when a request cannot be made. It starts no process but through
// e2e/harness, and it reaches nodes only through their ports, never their
// internals.
package e2etest
