package main

import (
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/queen-mq/queen/raftgroups"
)

// Standby commands (docs/standby.md): a standby's lag as /health shows it,
// and its promotion.

func newStandbyCommand(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "standby", Short: "A standby cluster's follow state and its promotion (HTTP API, admin)"}
	cf.register(cmd)
	cmd.AddCommand(standbyStatus(cf), standbyPromote(cf))
	return cmd
}

func standbyStatus(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show whether the node follows a source, and how far behind each raft group is; a node that follows none exits 2",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var ans struct {
				Standby *raftgroups.StandbyStatus `json:"standby"`
			}
			a, reqErr := c.do(http.MethodGet, "/health", nil, nil)
			if reqErr != nil && a.status != http.StatusServiceUnavailable {
				return reqErr
			}
			if err := jsonInto(a, &ans); err != nil {
				return err
			}
			if ans.Standby == nil {
				return refusedError("node %s follows no source (not a standby)", c.base)
			}
			s := ans.Standby
			return c.print(a, func(w io.Writer) {
				fmt.Fprintf(w, "node %s: following %v, source %s, lag %d entries, %d ms\n\n", c.base, s.Following, s.Source, s.LagEntries, s.LagMs)
				row(w, "GROUP", "LAG_ENTRIES", "LAG_MS", "APPLIED", "SOURCE_COMMIT")
				for _, g := range s.Groups {
					row(w, g.Group, g.Entries, g.Ms, g.Applied, g.Commit)
				}
			})
		},
	}
}

func standbyPromote(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "promote",
		Short: "Stop following the source: every raft group takes writes from the last source entry it applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var ans struct {
				Promoted    bool     `json:"promoted"`
				SourceIndex []uint64 `json:"sourceIndex"`
				AbortedTxns int      `json:"abortedTxns"`
			}
			a, err := c.getJSON(http.MethodPost, "/api/v1/system/standby/promote", nil, nil, &ans)
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				fmt.Fprintf(w, "promoted: writable from source entries %v (per raft group); %d open Kafka transactions aborted\n",
					ans.SourceIndex, ans.AbortedTxns)
			})
		},
	}
}
