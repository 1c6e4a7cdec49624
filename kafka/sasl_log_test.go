package kafka

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRefusedLoginsLogBoundedAndThrottled: a refused login's user name is
// the client's to choose (up to the 512 KiB pre-authentication frame), and
// refusals come as fast as a client can connect: the log gets a bounded
// prefix of the name and at most one refusal line a second.
func TestRefusedLoginsLogBoundedAndThrottled(t *testing.T) {
	var logs lockedBuffer
	rec := &principalRecorder{seen: make(chan Principal, 16)}
	s := startServer(t, Config{Authenticate: tenantAuthenticator, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		func(s *Server) { must(t, s.RegisterHandler(3, rec.handle)) })
	const logins = 30
	// As large as a frame before login may be (its cap refuses larger ones
	// before anything is logged).
	huge := strings.Repeat("u", 60<<10)
	for range logins {
		c := dialRaw(t, s)
		saslHandshake(c, 1, "PLAIN")
		if resp := saslAuthenticate(c, "\x00"+huge+"\x00nope"); resp.ErrorCode == 0 {
			t.Fatal("a wrong password logged in")
		}
		c.expectClosed()
	}
	out := logs.String()
	lines := strings.Count(out, "authentication refused")
	if len(out) > 8<<10 || lines == 0 || lines > 5 {
		t.Fatalf("%d refused logins with a 60 KiB user name wrote %d refusal lines, %d KiB of log",
			logins, lines, len(out)>>10)
	}
	if !strings.Contains(out, "uuuu") || !strings.Contains(out, "61440 bytes") {
		t.Fatalf("the refusal line does not show the name's start and size:\n%.2000s", out)
	}
}
