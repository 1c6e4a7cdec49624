package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// Queue commands: the resources routes and configure (spec §2.9, §2.10).

type messageCountsJSON struct {
	Total      uint64 `json:"total"`
	Pending    uint64 `json:"pending"`
	Processing uint64 `json:"processing"`
	Completed  uint64 `json:"completed"`
	Failed     uint64 `json:"failed"`
	DeadLetter uint64 `json:"deadLetter"`
}

func newQueuesCommand(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "List, create, describe and delete queues (HTTP API)"}
	cf.register(cmd)
	cmd.AddCommand(queuesList(cf), queuesCreate(cf), queuesDescribe(cf), queuesDelete(cf))
	return cmd
}

func queuesList(cf *clientFlags) *cobra.Command {
	var namespace, task string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List queues with their message counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			q := url.Values{}
			if namespace != "" {
				q.Set("namespace", namespace)
			}
			if task != "" {
				q.Set("task", task)
			}
			type queueRow struct {
				Name       string            `json:"name"`
				Namespace  *string           `json:"namespace"`
				Task       *string           `json:"task"`
				CreatedAt  string            `json:"createdAt"`
				Partitions int               `json:"partitions"`
				Messages   messageCountsJSON `json:"messages"`
			}
			var queues []queueRow
			a, err := getPages(c, "/api/v1/resources/queues", q, func(page struct {
				Queues []queueRow `json:"queues"`
			}) {
				queues = append(queues, page.Queues...)
			})
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				row(w, "NAME", "NAMESPACE", "TASK", "PARTITIONS", "TOTAL", "PENDING", "PROCESSING", "COMPLETED", "FAILED", "DLQ", "CREATED")
				for _, q := range queues {
					m := q.Messages
					row(w, q.Name, q.Namespace, q.Task, q.Partitions, m.Total, m.Pending, m.Processing, m.Completed, m.Failed, m.DeadLetter, q.CreatedAt)
				}
			})
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", "", "only queues of this namespace")
	cmd.Flags().StringVar(&task, "task", "", "only queues of this task")
	return cmd
}

func queuesCreate(cf *clientFlags) *cobra.Command {
	var namespace, task string
	var options []string
	cmd := &cobra.Command{
		Use:   "create QUEUE",
		Short: "Create a queue, or change the options of an existing one (POST /api/v1/configure)",
		Example: `  queen queues create orders
  queen queues create payments --namespace billing --option leaseTime=120 --option retryLimit=5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			body := map[string]any{"queue": args[0]}
			if namespace != "" {
				body["namespace"] = namespace
			}
			if task != "" {
				body["task"] = task
			}
			opts := map[string]json.RawMessage{}
			for _, o := range options {
				k, v, ok := strings.Cut(o, "=")
				if !ok || k == "" {
					return usageError("--option %q is not name=value", o)
				}
				opts[k] = jsonOrString(v)
			}
			body["options"] = opts
			var ans struct {
				QueueID   string         `json:"queueId"`
				Queue     string         `json:"queue"`
				Namespace *string        `json:"namespace"`
				Task      *string        `json:"task"`
				Options   map[string]any `json:"options"`
			}
			a, err := c.getJSON(http.MethodPost, "/api/v1/configure", nil, body, &ans)
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				row(w, "QUEUE", "ID", "NAMESPACE", "TASK")
				row(w, ans.Queue, ans.QueueID, ans.Namespace, ans.Task)
				io.WriteString(w, "\n")
				optionRows(w, ans.Options)
			})
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", "", "namespace label")
	cmd.Flags().StringVar(&task, "task", "", "task label")
	cmd.Flags().StringArrayVar(&options, "option", nil, "queue option name=value (JSON value or text), repeatable: leaseTime, retryLimit, ttl, encryptionEnabled, ...")
	return cmd
}

// optionRows prints a queue's options sorted by name.
func optionRows(w io.Writer, opts map[string]any) {
	names := make([]string, 0, len(opts))
	for k := range opts {
		names = append(names, k)
	}
	sort.Strings(names)
	row(w, "OPTION", "VALUE")
	for _, k := range names {
		row(w, k, opts[k])
	}
}

func queuesDescribe(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe QUEUE",
		Short: "Show a queue's partitions, counts and options",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			type queuePage struct {
				ID         string            `json:"id"`
				Name       string            `json:"name"`
				Namespace  *string           `json:"namespace"`
				Task       *string           `json:"task"`
				CreatedAt  string            `json:"createdAt"`
				Totals     messageCountsJSON `json:"totals"`
				Config     map[string]any    `json:"config"`
				Partitions []struct {
					ID            string            `json:"id"`
					Name          string            `json:"name"`
					Messages      messageCountsJSON `json:"messages"`
					HighWatermark uint64            `json:"highWatermark"`
					LogStart      uint64            `json:"logStartOffset"`
					LastActivity  *string           `json:"lastActivity"`
				} `json:"partitions"`
			}
			// The queue from its first page, every page's partitions.
			var ans queuePage
			first := true
			a, err := getPages(c, "/api/v1/resources/queues/"+pathSegment(args[0]), nil, func(page queuePage) {
				if first {
					ans, first = page, false
				} else {
					ans.Partitions = append(ans.Partitions, page.Partitions...)
				}
			})
			if err != nil {
				return err
			}
			return c.print(a, func(w io.Writer) {
				t := ans.Totals
				row(w, "QUEUE", "ID", "NAMESPACE", "TASK", "PARTITIONS", "TOTAL", "PENDING", "PROCESSING", "COMPLETED", "FAILED", "DLQ", "CREATED")
				row(w, ans.Name, ans.ID, ans.Namespace, ans.Task, len(ans.Partitions), t.Total, t.Pending, t.Processing, t.Completed, t.Failed, t.DeadLetter, ans.CreatedAt)
				io.WriteString(w, "\n")
				row(w, "PARTITION", "ID", "LOG_START", "HIGH_WATERMARK", "PENDING", "PROCESSING", "COMPLETED", "FAILED", "DLQ", "LAST_ACTIVITY")
				for _, p := range ans.Partitions {
					m := p.Messages
					row(w, p.Name, p.ID, p.LogStart, p.HighWatermark, m.Pending, m.Processing, m.Completed, m.Failed, m.DeadLetter, p.LastActivity)
				}
				io.WriteString(w, "\n")
				optionRows(w, ans.Config)
			})
		},
	}
}

func queuesDelete(cf *clientFlags) *cobra.Command {
	var ifExists bool
	cmd := &cobra.Command{
		Use:   "delete QUEUE",
		Short: "Delete a queue and all its messages (admin); a queue that does not exist is refused unless --if-exists",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var ans struct {
				Deleted bool   `json:"deleted"`
				Existed bool   `json:"existed"`
				Queue   string `json:"queue"`
			}
			a, err := c.getJSON(http.MethodDelete, "/api/v1/resources/queues/"+pathSegment(args[0]), nil, nil, &ans)
			if err != nil {
				return err
			}
			if err := c.print(a, func(w io.Writer) {
				row(w, "QUEUE", "DELETED", "EXISTED")
				row(w, args[0], ans.Deleted, ans.Existed)
			}); err != nil {
				return err
			}
			// The server answers 200 either way (Queen's behaviour, kept for
			// cleanup scripts); the command line says the queue was missing.
			if !ans.Existed && !ifExists {
				return refusedError("refused: queue %q does not exist, nothing was deleted (--if-exists accepts that)", args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "exit 0 when the queue does not exist")
	return cmd
}
