package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
)

// KV commands (spec §2.12): one key per call over the REST routes.

func newKVCommand(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "kv", Short: "Read, write and delete replicated KV entries (HTTP API)"}
	cf.register(cmd)
	cmd.AddCommand(kvGet(cf), kvPut(cf), kvDelete(cf))
	return cmd
}

// kvOpJSON is the answer of a KV write.
type kvOpJSON struct {
	Applied   bool            `json:"applied"`
	Reason    *string         `json:"reason"`
	Found     bool            `json:"found"`
	Version   uint64          `json:"version"`
	Value     json.RawMessage `json:"value"`
	ExpiresAt *string         `json:"expiresAt"`
}

func kvPath(ns, key string) string { return "/api/v1/kv/" + pathSegment(ns) + "/" + keyPath(key) }

func kvGet(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE KEY",
		Short: "Print a key's value and version; a missing key exits 2",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var ans struct {
				Found     bool            `json:"found"`
				Value     json.RawMessage `json:"value"`
				Version   uint64          `json:"version"`
				ExpiresAt *string         `json:"expiresAt"`
			}
			a, err := c.getJSON(http.MethodGet, kvPath(args[0], args[1]), nil, nil, &ans)
			if err != nil {
				return err
			}
			if err := c.print(a, func(w io.Writer) {
				if !ans.Found {
					return
				}
				row(w, "NAMESPACE", "KEY", "VERSION", "EXPIRES_AT", "VALUE")
				row(w, args[0], args[1], ans.Version, ans.ExpiresAt, ans.Value)
			}); err != nil {
				return err
			}
			if !ans.Found {
				return refusedError("refused: key %q not found in namespace %q", args[1], args[0])
			}
			return nil
		},
	}
}

func kvPut(cf *clientFlags) *cobra.Command {
	var ttl int
	var ifVersion uint64
	cmd := &cobra.Command{
		Use:   "put NAMESPACE KEY VALUE",
		Short: "Write a key (VALUE is JSON if valid, else text); --if-version makes it a compare-and-set",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			q := url.Values{}
			if ttl > 0 {
				q.Set("ttlSeconds", strconv.Itoa(ttl))
			}
			return kvWrite(c, http.MethodPut, q, []byte(jsonOrString(args[2])), ifVersion, args)
		},
	}
	cmd.Flags().IntVar(&ttl, "ttl", 0, "expire after this many seconds")
	cmd.Flags().Uint64Var(&ifVersion, "if-version", 0, "write only if the key is at this version")
	return cmd
}

func kvDelete(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE KEY",
		Short: "Delete a key",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			return kvWrite(c, http.MethodDelete, nil, nil, 0, args)
		},
	}
}

// kvWrite sends a put or delete and prints its outcome; a write the
// server did not apply (a version mismatch) exits 2.
func kvWrite(c *client, method string, query url.Values, body []byte, ifVersion uint64, args []string) error {
	var b any
	if body != nil {
		b = body
	}
	req := c
	if ifVersion > 0 {
		req = c.withHeader("If-Match", strconv.Quote(strconv.FormatUint(ifVersion, 10)))
	}
	var ans kvOpJSON
	a, err := req.getJSON(method, kvPath(args[0], args[1]), query, b, &ans)
	if err != nil {
		return err
	}
	if err := c.print(a, func(w io.Writer) {
		row(w, "NAMESPACE", "KEY", "APPLIED", "FOUND", "VERSION", "REASON")
		row(w, args[0], args[1], ans.Applied, ans.Found, ans.Version, ans.Reason)
	}); err != nil {
		return err
	}
	if !ans.Applied {
		return refusedError("refused: not applied (%s)", cell(ans.Reason))
	}
	return nil
}
