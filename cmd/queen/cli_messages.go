package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Message commands: push, pop and ack (spec §2.4–§2.6).

func newPushCommand(cf *clientFlags) *cobra.Command {
	var partition, txn, bodyFile string
	cmd := &cobra.Command{
		Use:   "push QUEUE PAYLOAD... | push QUEUE - | push --body FILE",
		Short: "Push messages to a queue",
		Long: `Push one message per PAYLOAD to QUEUE. A payload that is valid JSON is sent as
that JSON (42, {"id":1}, "text"), anything else as a JSON string. With - as the
only payload every line of standard input is one payload. --body sends a whole
push request ({"items":[...]}) from a file, - for standard input, as it is.
Exits 2 when the server refuses the request or any item.`,
		Example: `  queen push orders '{"orderId":8891}' --partition customer-123
  seq 1 100 | queen push numbers -
  queen push --body items.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := pushBody(cmd, args, partition, txn, bodyFile)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var items []struct {
				Index         int     `json:"index"`
				TransactionID string  `json:"transaction_id"`
				QueueName     string  `json:"queueName"`
				Status        string  `json:"status"`
				Offset        *uint64 `json:"offset"`
				Error         string  `json:"error"`
			}
			a, err := c.getJSON(http.MethodPost, "/api/v1/push", nil, body, &items)
			if err != nil {
				return err
			}
			refused := 0
			err = c.print(a, func(w io.Writer) {
				row(w, "INDEX", "QUEUE", "STATUS", "OFFSET", "TRANSACTION_ID", "ERROR")
				for _, it := range items {
					var off any
					if it.Offset != nil {
						off = *it.Offset
					}
					row(w, it.Index, it.QueueName, it.Status, off, it.TransactionID, it.Error)
				}
			})
			for _, it := range items {
				if it.Status == "error" {
					refused++
				}
			}
			if err == nil && refused > 0 {
				err = refusedError("refused: %d of %d items", refused, len(items))
			}
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&partition, "partition", "", "partition (the server's default: Default)")
	cmd.Flags().StringVar(&txn, "transaction-id", "", "client transaction id for deduplication (one payload only)")
	cmd.Flags().StringVar(&bodyFile, "body", "", "send this file (- for standard input) as the whole request body")
	return cmd
}

// pushBody builds the push request from the arguments, or reads it whole.
func pushBody(cmd *cobra.Command, args []string, partition, txn, bodyFile string) ([]byte, error) {
	if bodyFile != "" {
		if len(args) > 0 {
			return nil, usageError("--body sends the whole request: give no QUEUE or payloads")
		}
		return readInput(cmd, bodyFile)
	}
	if len(args) < 2 {
		return nil, usageError("push needs a QUEUE and at least one PAYLOAD (or - for standard input, or --body)")
	}
	queue, payloads := args[0], args[1:]
	if len(payloads) == 1 && payloads[0] == "-" {
		payloads = nil
		sc := bufio.NewScanner(cmd.InOrStdin())
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				payloads = append(payloads, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, usageError("reading standard input: %v", err)
		}
		if len(payloads) == 0 {
			return nil, usageError("standard input held no payload")
		}
	}
	if txn != "" && len(payloads) != 1 {
		return nil, usageError("--transaction-id names one message: give one payload")
	}
	type item struct {
		Queue         string          `json:"queue"`
		Partition     string          `json:"partition,omitempty"`
		Payload       json.RawMessage `json:"payload"`
		TransactionID string          `json:"transactionId,omitempty"`
	}
	items := make([]item, len(payloads))
	for i, p := range payloads {
		items[i] = item{Queue: queue, Partition: partition, Payload: jsonOrString(p), TransactionID: txn}
	}
	return json.Marshal(map[string]any{"items": items})
}

// readInput reads a file named on the command line, - for standard input.
func readInput(cmd *cobra.Command, name string) ([]byte, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, usageError("read %s: %v", name, err)
	}
	return b, nil
}

// popAnswer is a pop's 200 body, the fields the table and ack use.
type popAnswer struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	ConsumerGroup string `json:"consumerGroup"`
	Messages      []struct {
		TransactionID   string          `json:"transactionId"`
		PartitionID     string          `json:"partitionId"`
		Partition       string          `json:"partition"`
		LeaseID         string          `json:"leaseId"`
		ConsumerGroup   string          `json:"consumerGroup"`
		Offset          uint64          `json:"offset"`
		DeliveryAttempt int             `json:"deliveryAttempt"`
		CreatedAt       string          `json:"createdAt"`
		Data            json.RawMessage `json:"data"`
	} `json:"messages"`
}

func newPopCommand(cf *clientFlags) *cobra.Command {
	var partition, group, subscription string
	var batch, waitMs, leaseSeconds int
	var wait, autoAck bool
	cmd := &cobra.Command{
		Use:   "pop QUEUE",
		Short: "Pop messages from a queue under a lease (ack them with 'queen ack')",
		Long: `Pop up to --batch messages from QUEUE (one partition, leased to this consumer).
No message is not an error: the table says so and --json prints {"messages":[]}.
'queen pop QUEUE --json | queen ack --from -' acknowledges what was popped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			path := "/api/v1/pop/queue/" + pathSegment(args[0])
			if partition != "" {
				path += "/partition/" + pathSegment(partition)
			}
			q := url.Values{"batch": {strconv.Itoa(batch)}}
			if wait {
				q.Set("wait", "true")
				q.Set("timeout", strconv.Itoa(waitMs))
				// The long poll must end on the server's side first.
				c.http.Timeout = max(c.http.Timeout, time.Duration(waitMs)*time.Millisecond+5*time.Second)
			}
			if group != "" {
				q.Set("consumerGroup", group)
			}
			if subscription != "" {
				q.Set("subscriptionMode", subscription)
			}
			if leaseSeconds > 0 {
				q.Set("leaseSeconds", strconv.Itoa(leaseSeconds))
			}
			if autoAck {
				q.Set("commitOnDelivery", "true")
			}
			var ans popAnswer
			a, err := c.getJSON(http.MethodGet, path, q, nil, &ans)
			if err != nil {
				return err
			}
			if a.status == http.StatusNoContent {
				a.body = []byte(`{"messages":[]}`)
			}
			return c.print(a, func(w io.Writer) {
				if len(ans.Messages) == 0 {
					io.WriteString(w, "no messages\n")
					return
				}
				fmt.Fprintf(w, "queue %s partition %s (partitionId %s) lease %s group %s\n\n",
					ans.Queue, ans.Partition, ans.PartitionID, cell(ans.LeaseID), ans.ConsumerGroup)
				row(w, "OFFSET", "TRANSACTION_ID", "ATTEMPT", "CREATED", "DATA")
				for _, m := range ans.Messages {
					row(w, m.Offset, m.TransactionID, m.DeliveryAttempt, m.CreatedAt, m.Data)
				}
			})
		},
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&partition, "partition", "", "pop this partition only")
	f.StringVar(&group, "group", "", "consumer group (bus mode); none: queue mode")
	f.StringVar(&subscription, "subscription", "", "where a new --group starts: all (the oldest message) or new (the server's DEFAULT_SUBSCRIPTION_MODE when unset)")
	f.IntVar(&batch, "batch", 1, "messages at most")
	f.BoolVar(&wait, "wait", false, "long-poll until a message arrives or --wait-ms passes")
	f.IntVar(&waitMs, "wait-ms", 30000, "long-poll bound, ms (max 60000)")
	f.IntVar(&leaseSeconds, "lease-seconds", 0, "lease length (default: the queue's leaseTime)")
	f.BoolVar(&autoAck, "auto-ack", false, "acknowledge on delivery (at most once)")
	return cmd
}

type ackItemJSON struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Status        string `json:"status,omitempty"`
	Error         string `json:"error,omitempty"`
}

func newAckCommand(cf *clientFlags) *cobra.Command {
	var partitionID, leaseID, group, from, errText string
	var failed bool
	cmd := &cobra.Command{
		Use:   "ack TRANSACTION_ID... --partition-id ID --lease-id LEASE | ack --from FILE",
		Short: "Acknowledge popped messages as completed (or --failed)",
		Long: `Acknowledge messages by transaction id, with the partitionId and leaseId their
pop answered, or every message of a pop's --json answer (--from FILE, - for
standard input). Exits 2 when any acknowledgment is refused.`,
		Example: `  queen pop orders --json | queen ack --from -
  queen ack 01a0fcca-5436-7000-ab29-ef2bea95314f --partition-id 42 --lease-id L --failed --error boom`,
		RunE: func(cmd *cobra.Command, args []string) error {
			status := "completed"
			if failed {
				status = "failed"
			}
			var acks []ackItemJSON
			switch {
			case from != "" && len(args) > 0:
				return usageError("--from acknowledges a pop's messages: give no transaction ids")
			case from != "":
				raw, err := readInput(cmd, from)
				if err != nil {
					return err
				}
				var pop popAnswer
				if err := json.Unmarshal(raw, &pop); err != nil {
					return usageError("--from %s is not a pop's JSON answer: %v", from, err)
				}
				for _, m := range pop.Messages {
					acks = append(acks, ackItemJSON{TransactionID: m.TransactionID, PartitionID: m.PartitionID,
						LeaseID: m.LeaseID, ConsumerGroup: m.ConsumerGroup, Status: status, Error: errText})
				}
				if len(acks) == 0 {
					// An empty pop piped in: nothing to do is not a failure.
					if cf.json {
						return writeRawJSON(cmd.OutOrStdout(), []byte("[]"))
					}
					_, err = io.WriteString(cmd.OutOrStdout(), "nothing to acknowledge\n")
					return err
				}
			case len(args) == 0:
				return usageError("ack needs transaction ids (with --partition-id and --lease-id) or --from")
			case partitionID == "":
				return usageError("--partition-id is required with transaction ids")
			default:
				for _, id := range args {
					acks = append(acks, ackItemJSON{TransactionID: id, PartitionID: partitionID, LeaseID: leaseID,
						ConsumerGroup: group, Status: status, Error: errText})
				}
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var out []struct {
				Index         int     `json:"index"`
				TransactionID string  `json:"transactionId"`
				Success       bool    `json:"success"`
				Error         *string `json:"error"`
				LeaseReleased bool    `json:"leaseReleased"`
				DLQ           bool    `json:"dlq"`
			}
			a, err := c.getJSON(http.MethodPost, "/api/v1/ack/batch", nil,
				map[string]any{"consumerGroup": group, "acknowledgments": acks}, &out)
			if err != nil {
				return err
			}
			refused := 0
			err = c.print(a, func(w io.Writer) {
				row(w, "INDEX", "TRANSACTION_ID", "SUCCESS", "LEASE_RELEASED", "DLQ", "ERROR")
				for _, r := range out {
					row(w, r.Index, r.TransactionID, r.Success, r.LeaseReleased, r.DLQ, r.Error)
				}
			})
			for _, r := range out {
				if !r.Success {
					refused++
				}
			}
			if err == nil && refused > 0 {
				err = refusedError("refused: %d of %d acknowledgments", refused, len(out))
			}
			return err
		},
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&partitionID, "partition-id", "", "partitionId the pop answered")
	f.StringVar(&leaseID, "lease-id", "", "leaseId the pop answered")
	f.StringVar(&group, "group", "", "consumer group the messages were popped for")
	f.StringVar(&from, "from", "", "acknowledge every message of a pop's --json answer in this file (- for standard input)")
	f.BoolVar(&failed, "failed", false, "acknowledge as failed (retried, then dead-lettered)")
	f.StringVar(&errText, "error", "", "failure reason recorded with --failed")
	return cmd
}
