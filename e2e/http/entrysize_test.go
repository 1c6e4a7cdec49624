package http

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// Requests of the largest size a raft entry may have, beside other
// traffic through every node, all commit and leave the group working; one
// over the limit is refused up front, 413 too_large over HTTP and
// MESSAGE_TOO_LARGE over Kafka. A small entry limit keeps it cheap: the
// group-commit and transport limits scale with it.
func TestMaxSizeRequestsBesideOtherTrafficCommit(t *testing.T) {
	const limit = 1 << 20
	c := e2etest.StartCluster(t, harness.Options{Nodes: 3, Groups: 1, Env: map[string]string{
		"QUEEN_RAFT_ENTRY_MAX_BYTES":    fmt.Sprint(limit),
		"QUEEN_KAFKA_MAX_MESSAGE_BYTES": fmt.Sprint(4 * limit),
	}})
	ctx := e2etest.Deadline(t, 3*time.Minute)
	cl := e2etest.NewClient(t, ctx, c.Nodes[0])

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	send := func(n *harness.Node, partition string, size, count int) {
		defer wg.Done()
		for i := 0; i < count; i++ {
			payload := strings.Repeat("x", size)
			res, code, err := e2etest.Push(ctx, n.URL(), e2etest.PushItems("big", partition, payload))
			if err != nil || code != http.StatusCreated || len(res) != 1 || res[0].Error != "" {
				errs <- fmt.Errorf("node %d push of %d bytes: %d %v %+v", n.ID, size, code, err, res)
				return
			}
		}
	}
	for k := 0; k < 6; k++ {
		wg.Add(1)
		go send(c.Nodes[k%3], fmt.Sprintf("small-%d", k), limit/4, 12)
	}
	for k := 0; k < 3; k++ {
		wg.Add(1)
		go send(c.Nodes[k], fmt.Sprintf("max-%d", k), limit-4<<10, 3)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var e e2etest.ErrorAnswer
	if code, err := e2etest.Call(ctx, http.MethodPost, c.Nodes[1].URL()+"/api/v1/push",
		map[string]any{"items": e2etest.PushItems("big", "over", strings.Repeat("x", limit+1))}, &e); err != nil || code != http.StatusRequestEntityTooLarge || e.Code != "too_large" {
		t.Fatalf("push over the entry limit: %d %v %+v", code, err, e)
	}
	prod := e2etest.KgoClient(t, c, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("bigtopic"),
		kgo.ProducerBatchMaxBytes(4*limit), kgo.MaxBufferedBytes(16*limit), kgo.RecordRetries(1))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("small Kafka record: %v", err)
	}
	// Random bytes: the producer compresses its batches, and a batch is
	// stored as it comes, so only what does not compress outgrows an entry.
	huge := make([]byte, limit+1)
	_, _ = rand.Read(huge)
	err := prod.ProduceSync(ctx, &kgo.Record{Value: huge}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Kafka record over the entry limit: %v, want MESSAGE_TOO_LARGE", err)
	}

	// The group still commits, and every replica has everything.
	cl.On(c.Nodes[2]).Push(e2etest.PushItems("big", "after", "x")...)
	for _, n := range c.Nodes {
		for k := 0; k < 3; k++ {
			cl.Eventually(30*time.Second, fmt.Sprintf("node %d to hold max-%d", n.ID, k), func() bool {
				_, hwm, err := e2etest.FetchAll(ctx, n.URL(), "big", fmt.Sprintf("max-%d", k))
				return err == nil && hwm == 3
			})
		}
	}
}
