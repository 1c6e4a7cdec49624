package proxy

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/queen-mq/queen/http/api"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// The queue and partition caps (max_queues, max_partitions_per_queue):
// a push or configure that would create a queue or partition beyond them
// is logged with would_block=true in shadow mode and refused with 403
// when enforced. What a cluster has is read from this node's copy of the
// broker's catalog and kept for censusTTL, so a burst of pushes reads it
// once; a cap may therefore be passed by what that second creates.

const censusTTL = time.Second

var (
	errQueueLimit     = newError(http.StatusForbidden, "queue_limit", "the cluster has as many queues as its plan allows")
	errPartitionLimit = newError(http.StatusForbidden, "partition_limit", "the queue has as many partitions as the plan allows")
)

// queueCensus is what one cluster had at one moment: its queues, and the
// partition names of those a request asked about.
type queueCensus struct {
	at         time.Time
	queues     map[string]bool
	partitions map[string]map[string]bool
}

type census struct {
	engine *raftgroups.Engine
	mu     sync.Mutex
	by     map[wire.ID]*queueCensus
}

// of returns tenant's census, read again when older than censusTTL.
func (c *census) of(tenant wire.ID, now time.Time) *queueCensus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[wire.ID]*queueCensus{}
	}
	qc := c.by[tenant]
	if qc != nil && now.Sub(qc.at) < censusTTL {
		return qc
	}
	qc = &queueCensus{at: now, queues: map[string]bool{}, partitions: map[string]map[string]bool{}}
	for _, q := range c.engine.Queues(tenant, storage.QueueFilter{}, c.engine.NowMs()) {
		qc.queues[q.Name] = true
	}
	if len(c.by) > 10000 { // bounded: forget the rest, rereading costs only reads
		c.by = map[wire.ID]*queueCensus{}
	}
	c.by[tenant] = qc
	return qc
}

// forget drops tenant's census, so the next check reads what it has now:
// after a Kafka create, whose next one must count it.
func (c *census) forget(tenant wire.ID) {
	c.mu.Lock()
	delete(c.by, tenant)
	c.mu.Unlock()
}

// partitionsOf returns the partition names of an existing queue.
func (c *census) partitionsOf(qc *queueCensus, tenant wire.ID, queue string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps, ok := qc.partitions[queue]; ok {
		return ps
	}
	ps := map[string]bool{}
	for _, q := range c.engine.Queues(tenant, storage.QueueFilter{Name: queue, Partitions: true}, c.engine.NowMs()) {
		for _, p := range q.Partitions {
			ps[p.Name] = true
		}
	}
	qc.partitions[queue] = ps
	return ps
}

// queueTarget is a queue a request writes to and the partitions it names.
type queueTarget struct {
	queue      string
	partitions map[string]bool
	// total, when set, is the partition count the queue is to have (a
	// Kafka topic created or grown to it, partitions named by index).
	total int
}

// pushTargets groups a push's items by queue.
func pushTargets(items []api.PushItem) []queueTarget {
	var out []queueTarget
	at := map[string]int{}
	for _, it := range items {
		i, ok := at[it.Queue]
		if !ok {
			i = len(out)
			at[it.Queue] = i
			out = append(out, queueTarget{queue: it.Queue, partitions: map[string]bool{}})
		}
		out[i].partitions[it.Partition] = true
	}
	return out
}

// configureTarget reads the queue a configure names.
func configureTarget(body []byte) []queueTarget {
	var req struct {
		Queue string `json:"queue"`
	}
	if json.Unmarshal(body, &req) != nil || req.Queue == "" {
		return nil
	}
	return []queueTarget{{queue: req.Queue}}
}

// overCaps says which cap, if any, the targets would pass in tenant.
func (c *census) overCaps(tenant wire.ID, targets []queueTarget, lim Limits, now time.Time) error {
	maxQ, maxP := lim[LimitMaxQueues], lim[LimitMaxPartitions]
	if len(targets) == 0 || (maxQ == nil && maxP == nil) {
		return nil
	}
	qc := c.of(tenant, now)
	newQueues := 0
	for _, t := range targets {
		var have map[string]bool
		if qc.queues[t.queue] {
			if maxP != nil {
				have = c.partitionsOf(qc, tenant, t.queue)
			}
		} else {
			newQueues++
		}
		if maxP == nil {
			continue
		}
		n := len(have)
		for p := range t.partitions {
			if !have[p] {
				n++
			}
		}
		if int64(max(n, t.total)) > *maxP {
			return errPartitionLimit
		}
	}
	if maxQ != nil && newQueues > 0 && int64(len(qc.queues)+newQueues) > *maxQ {
		return errQueueLimit
	}
	return nil
}
