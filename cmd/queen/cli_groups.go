package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
)

// Consumer group and dead-letter commands (spec §2.10, §2.11).

func newGroupsCommand(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "groups", Short: "List, describe and seek consumer groups (HTTP API)"}
	cf.register(cmd)
	cmd.AddCommand(groupsList(cf), groupsDescribe(cf), groupsSeek(cf))
	return cmd
}

func groupsList(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List consumer groups, one row per group and queue, with their lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			type groupRow struct {
				Name              string  `json:"name"`
				QueueName         string  `json:"queueName"`
				Members           int     `json:"members"`
				PartitionCursors  int     `json:"partitionCursors"`
				PartitionsWithLag int     `json:"partitionsWithLag"`
				TotalLag          uint64  `json:"totalLag"`
				MaxTimeLag        int64   `json:"maxTimeLag"`
				State             string  `json:"state"`
				SubscriptionMode  *string `json:"subscriptionMode"`
			}
			var rows []groupRow
			a, err := getPages(c, "/api/v1/consumer-groups", nil, func(page []groupRow) { rows = append(rows, page...) })
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				row(w, "GROUP", "QUEUE", "STATE", "MEMBERS", "PARTITIONS", "LAGGING", "LAG", "MAX_LAG_S", "MODE")
				for _, r := range rows {
					row(w, r.Name, r.QueueName, r.State, r.Members, r.PartitionCursors, r.PartitionsWithLag, r.TotalLag, r.MaxTimeLag, r.SubscriptionMode)
				}
			})
		},
	}
}

func groupsDescribe(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's position and lag in every partition it reads; a group with none is refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			type queueEntry struct {
				SubscriptionMode string `json:"subscriptionMode"`
				Partitions       []struct {
					Partition      string  `json:"partition"`
					PartitionID    string  `json:"partitionId"`
					Offset         uint64  `json:"offset"`
					HighWatermark  uint64  `json:"highWatermark"`
					OffsetLag      uint64  `json:"offsetLag"`
					TimeLagSeconds int64   `json:"timeLagSeconds"`
					LeaseActive    bool    `json:"leaseActive"`
					LastConsumedAt *string `json:"lastConsumedAt"`
				} `json:"partitions"`
			}
			// A queue's partitions may span pages: each page repeats its entry.
			ans := map[string]queueEntry{}
			a, err := getPages(c, "/api/v1/consumer-groups/"+pathSegment(args[0]), nil, func(page map[string]queueEntry) {
				for q, e := range page {
					if prev, ok := ans[q]; ok {
						e.Partitions = append(prev.Partitions, e.Partitions...)
					}
					ans[q] = e
				}
			})
			if err != nil {
				return err
			}
			// The server answers {} for a group it does not know (as Queen).
			if len(ans) == 0 {
				return refusedError("refused: consumer group %q has no subscription or position", args[0])
			}
			queues := make([]string, 0, len(ans))
			for q := range ans {
				queues = append(queues, q)
			}
			sort.Strings(queues)
			return c.print(a, func(w io.Writer) {
				row(w, "QUEUE", "PARTITION", "PARTITION_ID", "OFFSET", "HIGH_WATERMARK", "LAG", "TIME_LAG_S", "LEASED", "LAST_CONSUMED", "MODE")
				for _, q := range queues {
					e := ans[q]
					if len(e.Partitions) == 0 {
						row(w, q, nil, nil, nil, nil, nil, nil, nil, nil, e.SubscriptionMode)
					}
					for _, p := range e.Partitions {
						row(w, q, p.Partition, p.PartitionID, p.Offset, p.HighWatermark, p.OffsetLag, p.TimeLagSeconds, p.LeaseActive, p.LastConsumedAt, e.SubscriptionMode)
					}
				}
			})
		},
	}
}

func groupsSeek(cf *clientFlags) *cobra.Command {
	var partition, timestamp string
	var toEnd bool
	cmd := &cobra.Command{
		Use:   "seek GROUP QUEUE (--to-end | --to-time ISO-8601)",
		Short: "Move a group's position in a queue (or one --partition) to the end or to a time",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if toEnd == (timestamp != "") {
				return usageError("give one of --to-end and --to-time")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			path := "/api/v1/consumer-groups/" + pathSegment(args[0]) + "/queues/" + pathSegment(args[1])
			if partition != "" {
				path += "/partitions/" + pathSegment(partition)
			}
			path += "/seek"
			body := map[string]any{"toEnd": toEnd}
			if timestamp != "" {
				body = map[string]any{"timestamp": timestamp}
			}
			var ans struct {
				PartitionsUpdated int     `json:"partitionsUpdated"`
				SeekToEnd         bool    `json:"seekToEnd"`
				TargetTimestamp   *string `json:"targetTimestamp"`
			}
			a, err := c.getJSON(http.MethodPost, path, nil, body, &ans)
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				row(w, "GROUP", "QUEUE", "PARTITION", "TO_END", "TO_TIME", "PARTITIONS_UPDATED")
				row(w, args[0], args[1], partition, ans.SeekToEnd, ans.TargetTimestamp, ans.PartitionsUpdated)
			})
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "seek this partition only")
	cmd.Flags().BoolVar(&toEnd, "to-end", false, "skip everything not consumed yet")
	cmd.Flags().StringVar(&timestamp, "to-time", "", "start from the messages written at or after this ISO-8601 time")
	return cmd
}

func newDLQCommand(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "dlq", Short: "List and replay dead-lettered messages (HTTP API)"}
	cf.register(cmd)
	cmd.AddCommand(dlqList(cf), dlqReplay(cf))
	return cmd
}

func dlqList(cf *clientFlags) *cobra.Command {
	var queue, group string
	var limit, offset int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered messages not yet replayed, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
			if queue != "" {
				q.Set("queue", queue)
			}
			if group != "" {
				q.Set("consumerGroup", group)
			}
			var ans struct {
				Total    int `json:"total"`
				Messages []struct {
					ID            string          `json:"id"`
					Queue         string          `json:"queue"`
					Partition     string          `json:"partition"`
					Offset        uint64          `json:"offset"`
					ConsumerGroup string          `json:"consumerGroup"`
					RetryCount    int             `json:"retryCount"`
					ErrorMessage  *string         `json:"errorMessage"`
					FailedAt      string          `json:"failedAt"`
					Data          json.RawMessage `json:"data"`
				} `json:"messages"`
			}
			a, err := c.getJSON(http.MethodGet, "/api/v1/dlq", q, nil, &ans)
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				row(w, "ID", "QUEUE", "PARTITION", "OFFSET", "GROUP", "RETRIES", "FAILED_AT", "ERROR", "DATA")
				for _, m := range ans.Messages {
					row(w, m.ID, m.Queue, m.Partition, m.Offset, m.ConsumerGroup, m.RetryCount, m.FailedAt, m.ErrorMessage, m.Data)
				}
				if len(ans.Messages) < ans.Total {
					row(w, "("+strconv.Itoa(ans.Total)+" in all: --offset and --limit page)")
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "only this queue's")
	f.StringVar(&group, "group", "", "only this consumer group's")
	f.IntVar(&limit, "limit", 100, "rows at most (max 1000)")
	f.IntVar(&offset, "offset", 0, "rows to skip")
	return cmd
}

func dlqReplay(cf *clientFlags) *cobra.Command {
	var queue, partition string
	cmd := &cobra.Command{
		Use:   "replay ID",
		Short: "Push a dead-lettered message again (to its queue, or --queue/--partition) and drop its row",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := strconv.ParseUint(args[0], 10, 64); err != nil {
				return usageError("ID must be a dead-letter row id (the ID column of 'queen dlq list'), got %q", args[0])
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var body any
			if queue != "" || partition != "" {
				body = map[string]string{"queue": queue, "partition": partition}
			}
			var ans struct {
				Result        string `json:"result"`
				Queue         string `json:"queue"`
				Partition     string `json:"partition"`
				Offset        uint64 `json:"offset"`
				TransactionID string `json:"transactionId"`
			}
			a, err := c.getJSON(http.MethodPost, "/api/v1/dlq/"+args[0]+"/replay", nil, body, &ans)
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				row(w, "ID", "RESULT", "QUEUE", "PARTITION", "OFFSET", "TRANSACTION_ID")
				row(w, args[0], ans.Result, ans.Queue, ans.Partition, ans.Offset, ans.TransactionID)
			})
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "replay into this queue instead")
	cmd.Flags().StringVar(&partition, "partition", "", "replay into this partition instead")
	return cmd
}
