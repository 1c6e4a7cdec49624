package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/crypto/nodetls/nodetlstest"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
)

// TestProxyPortTLS serves the proxy port over TLS with QUEEN_TLS_CERT and
// QUEEN_TLS_KEY and refuses a plaintext client.
func TestProxyPortTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := nodetlstest.NewCA(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(dir, nodetlstest.Leaf{Name: "proxy"})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := testProxy(t, Config{Addr: raftgroupstest.FreeAddr(t), TLSCert: cert, TLSKey: key, SpoolDir: t.TempDir()})
	p.broker = func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(http.StatusOK); ctx.SetBodyString("healthy") }
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + p.Addr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "healthy" || resp.TLS == nil {
		t.Fatalf("over TLS: %d %q", resp.StatusCode, body)
	}
	if resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.Addr() + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a plaintext request was served on the TLS port")
		}
	}
}

func TestTransportErrorsAreJSON(t *testing.T) {
	var rc fasthttp.RequestCtx
	transportError(&rc, fasthttp.ErrBodyTooLarge)
	if rc.Response.StatusCode() != http.StatusRequestEntityTooLarge || string(rc.Response.Header.ContentType()) != "application/json" {
		t.Fatalf("%d %s", rc.Response.StatusCode(), rc.Response.Body())
	}
	var rc2 fasthttp.RequestCtx
	transportError(&rc2, io.ErrUnexpectedEOF)
	if rc2.Response.StatusCode() != http.StatusBadRequest || !json.Valid(rc2.Response.Body()) {
		t.Fatalf("%d %s", rc2.Response.StatusCode(), rc2.Response.Body())
	}
}
