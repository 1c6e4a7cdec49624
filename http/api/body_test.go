package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// declaredBody is the Content-Length the body tests declare: under the
// 64 MiB cap, so only reading it decides what it costs.
const declaredBody = 50 << 20

// preRead is what fasthttp reads of a streamed body before any handler
// runs (its fixed 8 KiB pre-read): the tests send that much, the rest
// never arrives.
const preRead = 8 << 10

// pollBuffered polls the node's buffered-body gauge until it reaches want
// or the deadline passes.
func pollBuffered(t *testing.T, n *node, want int) bool {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		_, body := call(t, "GET", n.url+"/metrics/prometheus", "", "")
		if m := bufferedMetric.FindStringSubmatch(body); m != nil {
			if v, _ := strconv.Atoi(m[1]); v >= want {
				return true
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			return false
		}
	}
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// openPost opens a connection and sends a POST's headers declaring
// declaredBody bytes, then the first sent bytes of the body.
func openPost(t *testing.T, addr, path, extraHeaders string, sent int) net.Conn {
	t.Helper()
	return openPostOf(t, addr, path, extraHeaders, declaredBody, sent)
}

// openPostOf is openPost declaring declared bytes.
func openPostOf(t *testing.T, addr, path, extraHeaders string, declared, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: queen\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n",
		path, extraHeaders, declared)
	if _, err := c.Write([]byte(head + strings.Repeat(" ", sent))); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUnauthenticatedBodiesAreNotRead: with JWT on, a request without a
// token is refused from its headers: the body it declares is neither
// allocated nor waited for (the review's 60 slow connections took 4 GB).
func TestUnauthenticatedBodiesAreNotRead(t *testing.T) {
	n := startJWTNode(t, func(c *Config) { c.MaxBodyBytes = 64 << 20 })
	const conns = 8
	before := totalAlloc()
	var open []net.Conn
	for range conns {
		open = append(open, openPost(t, n.srv.Addr(), "/api/v1/push", "", preRead))
	}
	for i, c := range open {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: no answer before its body arrived (%v); the node allocated %d MiB meanwhile",
				i, err, (totalAlloc()-before)>>20)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("connection %d: %d, want 401", i, resp.StatusCode)
		}
	}
	if grew := totalAlloc() - before; grew > 16<<20 {
		t.Fatalf("%d refused requests declaring %d MiB each allocated %d MiB", conns, declaredBody>>20, grew>>20)
	}
}

var bufferedMetric = regexp.MustCompile(`(?m)^queen_http_buffered_body_bytes (\d+)$`)

// TestBodiesCostWhatArrives: a body is buffered as it arrives, not
// allocated at the size its Content-Length declares, and what is buffered
// is visible in the metrics.
func TestBodiesCostWhatArrives(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) { c.MaxBodyBytes = 64 << 20 })
	const conns, sent = 8, preRead
	before := totalAlloc()
	for range conns {
		openPost(t, n.srv.Addr(), "/api/v1/push", "", sent)
	}
	if !pollBuffered(t, n, conns*sent) {
		t.Fatalf("the node never reported buffering the %d bodies; it allocated %d MiB for them",
			conns, (totalAlloc()-before)>>20)
	}
	if grew := totalAlloc() - before; grew > 16<<20 {
		t.Fatalf("%d bodies of which %d bytes arrived allocated %d MiB", conns, sent, grew>>20)
	}
}

// TestOversizedBodiesAndConnectionLimits: a body over the cap is a
// plain-text 413 however it is sent; the buffered-bytes budget and the
// per-IP connection limit refuse what is over them.
func TestOversizedBodiesAndConnectionLimits(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) {
		c.MaxBodyBytes, c.MaxConnsPerIP = 1<<20, 4
	})
	// Raw requests that send no more than the node reads before refusing:
	// bytes left unread when it closes would reset the connection before
	// the client reads the answer.
	answer := func(c net.Conn) (int, string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Declared over the cap: refused from the headers.
	if code, body := answer(openPostOf(t, n.srv.Addr(), "/api/v1/push", "", 1<<20+64, preRead)); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "QUEEN_MAX_BODY_BYTES") {
		t.Fatalf("over the cap with Content-Length: %d %s", code, body)
	}
	// Chunked: no Content-Length to refuse up front; refused once the
	// bytes that arrived pass the cap.
	chunked, err := net.Dial("tcp", n.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer chunked.Close()
	over := 1<<20 + 1
	fmt.Fprintf(chunked, "POST /api/v1/push HTTP/1.1\r\nHost: queen\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
		over, strings.Repeat("x", over))
	if code, _ := answer(chunked); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the cap chunked: %d", code)
	}
	if code, body := call(t, "POST", n.url+"/api/v1/push", "", `{"items":[{"queue":"q","payload":1}]}`); code != http.StatusCreated {
		t.Fatalf("a small push: %d %s", code, body)
	}

	// The per-IP limit: 4 connections held open, the fifth is refused.
	http.DefaultClient.CloseIdleConnections()
	for range 4 {
		openPostOf(t, n.srv.Addr(), "/api/v1/push", "", 512<<10, preRead)
	}
	fifth, err := net.Dial("tcp", n.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fifth.Close()
	_ = fifth.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(fifth, "GET /health HTTP/1.1\r\nHost: queen\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(fifth), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a fifth connection from one IP: %d, want 429", resp.StatusCode)
	}
}

// TestBufferedBodyBudget: bodies being read share one byte budget; a body
// that would take it over is answered 429 overloaded and frees its share.
func TestBufferedBodyBudget(t *testing.T) {
	n := startNodeConfig(t, nil, func(c *Config) { c.MaxBodyBytes, c.MaxBufferedBytes = 1<<20, 1<<20 })
	// One slow body holds most of the budget...
	openPostOf(t, n.srv.Addr(), "/api/v1/push", "", 1000<<10, 900<<10)
	if !pollBuffered(t, n, 900<<10) {
		t.Fatal("the slow body was never buffered")
	}
	// ...so a 200 KiB push does not fit.
	push := `{"items":[{"queue":"q","payload":"` + strings.Repeat("x", 200<<10) + `"}]}`
	code, body := call(t, "POST", n.url+"/api/v1/push", "", push)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"code":"overloaded"`) {
		t.Fatalf("over the budget: %d %s", code, body)
	}
}
