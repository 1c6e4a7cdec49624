package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
)

// Cluster commands: the node's health and the membership routes (spec
// §2.17, §2.18, §4.4).

func newClusterCommand(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Raft status of a node and cluster membership (HTTP API, admin)"}
	cf.register(cmd)
	cmd.AddCommand(clusterStatus(cf), clusterMembers(cf), clusterAdd(cf), clusterPromote(cf), clusterRemove(cf))
	return cmd
}

func clusterStatus(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the node's raft groups: role, leader, term, commit and apply; a node not ready exits 3",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var ans struct {
				Status      string `json:"status"`
				Version     string `json:"version"`
				StorageFull bool   `json:"storageFull"`
				Groups      []struct {
					Group       int    `json:"group"`
					Role        string `json:"role"`
					Leader      uint64 `json:"leader"`
					Term        uint64 `json:"term"`
					Commit      uint64 `json:"commit"`
					Applied     uint64 `json:"applied"`
					Lag         uint64 `json:"lag"`
					QuorumAckMs int64  `json:"quorumAckMs"`
				} `json:"groups"`
			}
			// /health answers 503 with the same body while the node
			// settles: show it, then say so.
			a, reqErr := c.do(http.MethodGet, "/health", nil, nil)
			if reqErr != nil && a.status != http.StatusServiceUnavailable {
				return reqErr
			}
			if err := jsonInto(a, &ans); err != nil {
				return err
			}
			err = c.print(a, func(w io.Writer) {
				fmt.Fprintf(w, "node %s: %s, version %s, storage full %v\n\n", c.base, ans.Status, ans.Version, ans.StorageFull)
				row(w, "GROUP", "ROLE", "LEADER", "TERM", "COMMIT", "APPLIED", "LAG", "QUORUM_ACK_MS")
				for _, g := range ans.Groups {
					row(w, g.Group, g.Role, g.Leader, g.Term, g.Commit, g.Applied, g.Lag, g.QuorumAckMs)
				}
			})
			if err == nil && reqErr != nil {
				err = serverError("node is not ready: %s", ans.Status)
			}
			return err
		},
	}
}

// membershipJSON is the membership view the routes answer.
type membershipJSON struct {
	OK         bool `json:"ok"`
	Membership struct {
		Leader   uint64   `json:"leader"`
		Term     uint64   `json:"term"`
		Voters   []uint64 `json:"voters"`
		Learners []uint64 `json:"learners"`
		Source   string   `json:"source"`
		Members  []struct {
			NodeID uint64 `json:"nodeId"`
			Voter  bool   `json:"voter"`
			Raft   string `json:"raft"`
			HTTP   string `json:"http"`
			Live   bool   `json:"live"`
			Lag    uint64 `json:"lag"`
			Groups int    `json:"groups"`
			Error  string `json:"error"`
		} `json:"members"`
	} `json:"membership"`
}

const membershipPath = "/api/v1/system/raft/membership"

// membershipCall sends a membership request and prints the membership the
// server answers with.
func membershipCall(cf *clientFlags, cmd *cobra.Command, method, path string, query url.Values, body any) error {
	c, err := cf.client(cmd)
	if err != nil {
		return err
	}
	var ans membershipJSON
	a, err := c.getJSON(method, path, query, body, &ans)
	if err != nil {
		return err
	}
	return c.print(a, func(w io.Writer) {
		m := &ans.Membership
		fmt.Fprintf(w, "leader %d term %d voters %v learners %v (read from %s)\n\n", m.Leader, m.Term, m.Voters, m.Learners, m.Source)
		row(w, "NODE", "ROLE", "LIVE", "LAG", "GROUPS", "RAFT", "HTTP", "ERROR")
		for _, n := range m.Members {
			role := "learner"
			if n.Voter {
				role = "voter"
			}
			row(w, n.NodeID, role, n.Live, n.Lag, n.Groups, n.Raft, n.HTTP, n.Error)
		}
	})
}

func clusterMembers(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members: voters and learners, liveness and lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return membershipCall(cf, cmd, http.MethodGet, membershipPath, nil, nil)
		},
	}
}

func clusterAdd(cf *clientFlags) *cobra.Command {
	var raft, httpAddr string
	cmd := &cobra.Command{
		Use:   "add NODE_ID --raft HOST:PORT --http HOST:PORT",
		Short: "Add a node as a learner (start it with QUEEN_RAFT_JOIN=true, then promote it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := nodeID(args[0])
			if err != nil {
				return err
			}
			if raft == "" {
				return usageError("--raft is required: the new node's raft address (group 0's port)")
			}
			return membershipCall(cf, cmd, http.MethodPost, membershipPath+"/learners", nil,
				map[string]any{"id": id, "raft": raft, "http": httpAddr})
		},
	}
	cmd.Flags().StringVar(&raft, "raft", "", "the node's raft address, host:port of group 0")
	cmd.Flags().StringVar(&httpAddr, "http", "", "the node's HTTP address, host:port")
	return cmd
}

func clusterPromote(cf *clientFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "promote NODE_ID...",
		Short: "Make learners voters (refused while a learner is behind, unless --force)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := make([]uint64, len(args))
			for i, a := range args {
				id, err := nodeID(a)
				if err != nil {
					return err
				}
				ids[i] = id
			}
			return membershipCall(cf, cmd, http.MethodPost, membershipPath+"/promote", nil,
				map[string]any{"ids": ids, "force": force})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "promote even a learner that is behind")
	return cmd
}

func clusterRemove(cf *clientFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "Remove a member from every raft group (its id can never come back)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := nodeID(args[0])
			if err != nil {
				return err
			}
			var q url.Values
			if force {
				q = url.Values{"force": {"true"}}
			}
			return membershipCall(cf, cmd, http.MethodDelete, membershipPath+"/members/"+strconv.FormatUint(id, 10), q, nil)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove even when the voters left would not hold a live majority")
	return cmd
}

func nodeID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError("node id must be a positive whole number, got %q", s)
	}
	return id, nil
}
