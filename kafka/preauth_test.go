package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// login runs the SaslHandshake v1 + SaslAuthenticate flow as alice.
func login(t *testing.T, c *rawClient) {
	t.Helper()
	if resp := saslHandshake(c, 1, "PLAIN"); resp.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", resp.ErrorCode)
	}
	if resp := saslAuthenticate(c, "\x00alice\x00secret"); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %s", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestStalledFramesBeforeLoginDoNotStallOthers: connections that announce
// a frame and send none of it, or one byte of it, must not take the budget
// every other client needs. Before the fix each took its frame's first
// chunk when the size arrived, and a few hundred such connections held the
// whole node-wide budget before any login.
func TestStalledFramesBeforeLoginDoNotStallOthers(t *testing.T) {
	const budget = 256 << 10
	s := startServer(t, Config{Authenticate: tenantAuthenticator, MaxRequestBytes: budget, MaxBufferedRequestBytes: budget}, nil)
	const announced = 60 << 10 // under the pre-login frame limit
	for range 8 {
		dialRaw(t, s).writeRaw(binary.BigEndian.AppendUint32(nil, announced))
	}
	const started = 4
	for range started {
		dialRaw(t, s).writeRaw(append(binary.BigEndian.AppendUint32(nil, announced), 0))
	}
	// Only the frames whose bytes began to arrive hold budget, one first
	// chunk each.
	waitFor(t, "the started frames to hold one first chunk each", func() bool {
		return s.budget.inUse() == started*(16<<10)
	})
	c := dialRaw(t, s)
	c.roundTrip(apiVersionsRequest(3))
	login(t, c)
	c.roundTrip(apiVersionsRequest(3))
}
