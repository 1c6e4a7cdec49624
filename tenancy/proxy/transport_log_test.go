//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// syncBuffer is a log sink several goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureStderr sends the process's fd 2 to a file until the returned
// function is called, which gives back what was written: a library logging
// past the proxy's *slog.Logger (fasthttp's default logger) shows up here.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	return func() string {
		_ = syscall.Dup3(saved, 2, 0)
		_ = syscall.Close(saved)
		b, _ := os.ReadFile(f.Name())
		f.Close()
		return string(b)
	}
}

// TestMalformedRequestsLogBoundedAndRedacted floods the proxy port with
// requests fasthttp cannot read, each carrying credentials, and checks that
// everything logged (the proxy's logger and the process's stderr) stays a
// few lines and holds none of the credentials (issue 33 item 7).
func TestMalformedRequestsLogBoundedAndRedacted(t *testing.T) {
	const (
		apiKey  = "qk_live_SECRETSECRETSECRETSECRETSECRETSECRET123"
		cookie  = "queen_session=COOKIESECRETCOOKIESECRET"
		xAPIKey = "XAPIKEYSECRETXAPIKEYSECRET"
	)
	creds := "Authorization: Bearer " + apiKey + "\r\nCookie: " + cookie + "\r\nX-Api-Key: " + xAPIKey + "\r\n"
	requests := []string{
		// a header line without a colon
		"GET /api/v1/resources/queues HTTP/1.1\r\nHost: acme\r\n" + creds + "this line has no colon\r\n\r\n",
		// a header name with a space in it
		"POST /api/v1/push HTTP/1.1\r\nHost: acme\r\n" + creds + "Bad Name: x\r\n\r\n",
		// garbage request line
		"\x16\x03\x01 NOT HTTP " + creds + "\r\n\r\n",
		// a bad content length
		"POST /api/v1/push HTTP/1.1\r\nHost: acme\r\n" + creds + "Content-Length: -5\r\n\r\n",
		// headers past the read buffer
		"GET / HTTP/1.1\r\nHost: acme\r\n" + creds + "X-Pad: " + strings.Repeat("p", 8<<10) + "\r\n\r\n",
	}

	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, engine := raftgroupstest.Start(t)
	p := New(Config{Addr: raftgroupstest.FreeAddr(t), SpoolDir: t.TempDir(), TenantHeader: true}, engine, nil, log)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	addr := p.Addr()

	const flood = 2000
	stderr := captureStderr(t)
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := range work {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.WriteString(c, req)
				var buf [512]byte
				_, _ = c.Read(buf[:]) // the proxy's answer, or its close
				c.Close()
			}
		}()
	}
	start := time.Now()
	for i := range flood {
		work <- requests[i%len(requests)]
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	// A second later one more: its line says how many were held back.
	time.Sleep(1100 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, requests[0])
		var buf [512]byte
		_, _ = c.Read(buf[:])
		c.Close()
	}
	time.Sleep(200 * time.Millisecond) // let the last lines land
	elapsed = time.Since(start)
	out := stderr() + logs.String()

	lines := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines++
		}
	}
	// One line a second at most, plus a little slack for the first one.
	maxLines := int(elapsed/time.Second) + 3
	for _, secret := range []string{apiKey, "qk_live_", "COOKIESECRET", xAPIKey, "Bearer "} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	if lines > maxLines || len(out) > 16<<10 {
		t.Errorf("%d malformed requests in %v logged %d lines, %d bytes; want at most %d lines", flood, elapsed.Round(time.Millisecond), lines, len(out), maxLines)
	}
	if !strings.Contains(logs.String(), "proxy port: ") || !regexp.MustCompile(`lines_not_logged=[1-9]`).MatchString(logs.String()) {
		t.Errorf("no line on the proxy's logger counts the lines held back")
	}
	if t.Failed() || testing.Verbose() {
		if len(out) > 1200 {
			out = out[:1200] + fmt.Sprintf("...(%d bytes)", len(out))
		}
		t.Logf("log:\n%s", out)
	}
}

func TestWithoutQuoted(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`error when serving connection "127.0.0.1:6711"<->"[::1]:5123": error when reading request headers: ` +
			`malformed mime header: missing colon: "Authorization Bearer qk_live_x"`,
			`error when serving connection "127.0.0.1:6711"<->"[::1]:5123": error when reading request headers: ` +
				`malformed mime header: missing colon: "...(30 bytes)"`},
		{`invalid header value "Bearer \"x\" qk"`, `invalid header value "...(13 bytes)"`},
		{`cut "Cookie: queen_session=abc`, `cut "..."`},
		{"no quotes at all", "no quotes at all"},
	} {
		if got := withoutQuoted(tc.in); got != tc.want {
			t.Errorf("withoutQuoted(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
