package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// clientFlags are the settings every HTTP client command shares.
type clientFlags struct {
	url     string
	json    bool
	timeout time.Duration
}

const defaultURL = "http://127.0.0.1:6632"

// register adds the client flags to a top-level command and its children.
func (f *clientFlags) register(cmd *cobra.Command) *cobra.Command {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", envOr("QUEEN_URL", defaultURL), "node's HTTP API (env QUEEN_URL); the bearer token comes from QUEEN_TOKEN")
	pf.BoolVar(&f.json, "json", false, "print the server's JSON instead of a table")
	pf.DurationVar(&f.timeout, "timeout", 35*time.Second, "give up on the request after this long")
	return cmd
}

// client sends one command's requests to a node and prints the answers.
type client struct {
	base  string
	token string
	json  bool
	http  *http.Client
	out   io.Writer
	ctx   context.Context
	// header is added to every request (If-Match of a KV compare-and-set).
	header http.Header
}

// withHeader returns a copy of c that sends header name on its requests.
func (c *client) withHeader(name, value string) *client {
	cc := *c
	cc.header = c.header.Clone()
	if cc.header == nil {
		cc.header = http.Header{}
	}
	cc.header.Set(name, value)
	return &cc
}

func (f *clientFlags) client(cmd *cobra.Command) (*client, error) {
	u, err := url.Parse(strings.TrimRight(f.url, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("--url %q is not an http:// or https:// URL", f.url)
	}
	return &client{
		base: u.String(), token: strings.TrimSpace(envOr("QUEEN_TOKEN", "")), json: f.json,
		http: &http.Client{Timeout: f.timeout}, out: cmd.OutOrStdout(), ctx: cmd.Context(),
	}, nil
}

// errorEnvelope is the server's error body (spec §2.1).
type errorEnvelope struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// answer is one HTTP answer: status and body.
type answer struct {
	status int
	body   []byte
	next   string // a paged listing's next cursor, "" on its last page
}

// do sends a request and returns a 2xx answer. body is JSON-encoded unless
// it is already []byte. A 4xx answer is a refused error, a 5xx or a
// failure to reach the node a server error, both carrying the server's
// message and code.
func (c *client) do(method, path string, query url.Values, body any) (answer, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return answer{}, usageError("encode request: %v", err)
		}
		rd = bytes.NewReader(enc)
	}
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return answer{}, usageError("%v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, serverError("cannot reach %s: %v", c.base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, serverError("reading the answer of %s %s: %v", method, path, err)
	}
	a := answer{status: resp.StatusCode, body: raw, next: resp.Header.Get(nextCursorHeader)}
	if resp.StatusCode < 400 {
		return a, nil
	}
	msg := describeFailure(resp.StatusCode, raw)
	if resp.StatusCode < 500 {
		return a, refusedError("refused: %s", msg)
	}
	return a, serverError("server error: %s", msg)
}

// describeFailure renders an error answer: the envelope's message and code
// when there is one, else the body's first line.
func describeFailure(status int, raw []byte) string {
	var env errorEnvelope
	if json.Unmarshal(raw, &env) == nil && env.Error != "" {
		if env.Code != "" {
			return fmt.Sprintf("%s (%d %s)", env.Error, status, env.Code)
		}
		return fmt.Sprintf("%s (%d)", env.Error, status)
	}
	text, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
	if text == "" {
		text = http.StatusText(status)
	}
	return fmt.Sprintf("%s (%d)", text, status)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// jsonInto decodes an answer's body into out.
func jsonInto(a answer, out any) error {
	if err := json.Unmarshal(a.body, out); err != nil {
		return serverError("the answer (%d) is not the JSON expected: %v", a.status, err)
	}
	return nil
}

// nextCursorHeader names the next page of a paged listing (docs/http-api.md,
// "Paging").
const nextCursorHeader = "Queen-Next-Cursor"

// getPages reads a paged listing to its end, decoding each page into a
// fresh T handed to add; the answer's body is the pages' JSON documents
// one after another (a single document when there is one page).
func getPages[T any](c *client, path string, query url.Values, add func(page T)) (answer, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	var all answer
	for {
		a, err := c.do(http.MethodGet, path, q, nil)
		if err != nil {
			return a, err
		}
		var page T
		if err := json.Unmarshal(a.body, &page); err != nil {
			return a, serverError("the answer of GET %s is not the JSON expected: %v", path, err)
		}
		add(page)
		all.status = a.status
		all.body = append(append(all.body, bytes.TrimSpace(a.body)...), '\n')
		if a.next == "" {
			return all, nil
		}
		if a.next == q.Get("cursor") {
			return a, serverError("GET %s answered the same page cursor twice", path)
		}
		q.Set("cursor", a.next)
	}
}

// getJSON sends a request and decodes its 2xx answer into out.
func (c *client) getJSON(method, path string, query url.Values, body, out any) (answer, error) {
	a, err := c.do(method, path, query, body)
	if err != nil {
		return a, err
	}
	if out != nil && len(a.body) > 0 {
		if err := json.Unmarshal(a.body, out); err != nil {
			return a, serverError("the answer of %s %s is not the JSON expected: %v", method, path, err)
		}
	}
	return a, nil
}

// print writes the answer as the server's JSON (--json) or as a table.
func (c *client) print(a answer, table func(w io.Writer)) error {
	if c.json {
		return writeRawJSON(c.out, a.body)
	}
	return printTable(c.out, table)
}

// printValue writes v as indented JSON (--json) or as a table.
func printValue(w io.Writer, asJSON bool, v any, table func(w io.Writer)) error {
	if asJSON {
		return writeJSONValue(w, v)
	}
	return printTable(w, table)
}

// printTable writes the rows table writes as aligned columns.
func printTable(w io.Writer, table func(w io.Writer)) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// row writes one table row of cells separated by tabs.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		fmt.Fprint(w, cell(c))
	}
	io.WriteString(w, "\n")
}

// cell renders a value for a table: nil and empty as "-", JSON as compact
// text on one line.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		return strings.ReplaceAll(x, "\t", " ")
	case *string:
		if x == nil {
			return "-"
		}
		return cell(*x)
	case json.RawMessage:
		var b bytes.Buffer
		if json.Compact(&b, x) != nil {
			return string(x)
		}
		return b.String()
	}
	return fmt.Sprint(v)
}

func writeRawJSON(w io.Writer, raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("null")
	}
	_, err := w.Write(append(raw, '\n'))
	return err
}

func writeJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// pathSegment escapes one path segment; key keeps its slashes (KV keys and
// timers are routed by a catch-all segment).
func pathSegment(s string) string { return url.PathEscape(s) }

func keyPath(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// jsonOrString reads a command-line value as JSON when it is valid JSON,
// else as a JSON string: `42`, `{"a":1}` and `"x"` are themselves, `hello`
// is "hello".
func jsonOrString(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
