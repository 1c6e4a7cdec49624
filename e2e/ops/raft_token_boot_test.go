package ops

import (
	"net"
	"testing"
	"time"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// TestJWTWithAnOpenRaftPortRefusesToBoot: JWT_ENABLED=true without
// QUEEN_RAFT_TOKEN on a raft listener beyond loopback would leave the raft
// port and its /node/v1/ calls (membership, ephemeral relays of any
// tenant) open to anyone; the node stops before it listens and says how to
// proceed. The harness binds raft to 127.0.0.1, which the check lets
// through, so this node asks for 0.0.0.0 on its own port; the refusal
// comes from the configuration, before any listener opens.
func TestJWTWithAnOpenRaftPortRefusesToBoot(t *testing.T) {
	c, err := harness.NewCluster(e2etest.QueenBinary(t), harness.Options{Nodes: 1, BaseDir: t.TempDir(),
		Env: map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret, "QUEEN_KAFKA_SASL": "plain"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	n := c.Nodes[0]
	_, port, _ := net.SplitHostPort(n.RaftAddr)
	n.Env["QUEEN_RAFT_LISTEN"] = net.JoinHostPort("0.0.0.0", port)
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	ctx := e2etest.Deadline(t, 15*time.Second)
	if err := harness.Poll(ctx, 20*time.Millisecond, func() (bool, error) { return !n.Running(), nil }); err != nil {
		t.Fatal("the node kept running with an open raft port")
	}
	if n.ExitCode() == 0 || !n.Grep("QUEEN_RAFT_TOKEN: is unset while JWT_ENABLED=true") || !n.Grep("QUEEN_RAFT_ALLOW_ANONYMOUS=true") {
		t.Fatalf("exit %d, log:\n%s", n.ExitCode(), n.Log())
	}
}
