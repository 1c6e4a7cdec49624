package raftgroups

import (
	"context"
	"fmt"

	"github.com/queen-mq/queen/wire"
)

// PushOutcome is one push command's result, or the error that kept its
// group from committing it.
type PushOutcome struct {
	wire.PushResult
	Err error
}

// pushAttempts bounds how often a push is re-resolved after finding a
// shard of another incarnation (a queue deleted and created again while
// the request was in flight).
const pushAttempts = 3

// Push appends each command's records to the partition it names (by
// name), creating the queue and its partitions when missing. The commands of one group commit together in
// one raft entry; commands placed in different groups commit
// independently, each outcome saying what became of its own. err is set
// only when no command committed.
func (e *Engine) Push(ctx context.Context, tenant wire.ID, cmds []wire.PushCmd) ([]PushOutcome, error) {
	out := make([]PushOutcome, len(cmds))
	todo := make([]int, len(cmds))
	for i := range todo {
		todo[i] = i
	}
	// gone collects, by queue, the indexes a group refused as removed,
	// which the next resolve asks the home to drop (wire.AllocCmd.Gone).
	var gone map[string][]uint32
	for attempt := 0; len(todo) > 0; attempt++ {
		fresh := attempt > 0
		batches := e.placePushes(ctx, tenant, cmds, todo, fresh, gone, out)
		todo = todo[:0]
		groups := make([]int, 0, len(batches))
		for g := range batches {
			groups = append(groups, g)
		}
		fanOut(len(groups), func(k int) {
			g := groups[k]
			b := batches[g]
			res, err := e.Propose(ctx, g, b.cmds...)
			for j, ci := range b.items {
				if err != nil {
					out[ci].Err = err
					continue
				}
				r, derr := wire.DecodePushResult(res[len(b.cmds)-len(b.items)+j])
				if derr != nil {
					out[ci].Err = fmt.Errorf("raftgroups: push result: %w", derr)
					continue
				}
				r.QueueCreated = out[ci].QueueCreated // placePushes knows; the group does not
				out[ci].PushResult, out[ci].Err = r, nil
			}
		})
		if attempt+1 >= pushAttempts {
			break
		}
		for i := range out {
			// A push refused unsealed is sealed on its next attempt: the
			// group's copy of the options that refused it is this node's,
			// which applied the refusal (a proposal's result is its local
			// apply's), and placePushes reads it.
			if out[i].Err == nil && (out[i].Code == wire.CodeSealRequired || staleShard(out[i].Code)) {
				todo = append(todo, i)
				if out[i].Code == wire.CodePartitionGone {
					if gone == nil {
						gone = map[string][]uint32{}
					}
					gone[cmds[i].Queue] = append(gone[cmds[i].Queue], out[i].PartitionIndex)
				}
			}
		}
	}
	for i := range out {
		if out[i].Err == nil {
			return out, nil
		}
	}
	return out, out[0].Err
}

// groupBatch is what one group is asked to apply: the commands (preceded by
// the partitions to create there) and which request commands they are.
type groupBatch struct {
	cmds  []wire.Command
	items []int
}

// placePushes resolves the partitions of the commands in todo, queue by
// queue, and lays them out per group, sealing the records of encrypted
// queues. A queue that cannot be resolved fails its commands' outcomes.
func (e *Engine) placePushes(ctx context.Context, tenant wire.ID, cmds []wire.PushCmd, todo []int, fresh bool, gone map[string][]uint32, out []PushOutcome) map[int]*groupBatch {
	type queueReq struct {
		names []string
		seen  map[string]bool
		items []int
	}
	byQueue := map[string]*queueReq{}
	var order []string
	for _, i := range todo {
		c := &cmds[i]
		qr := byQueue[c.Queue]
		if qr == nil {
			qr = &queueReq{seen: map[string]bool{}}
			byQueue[c.Queue] = qr
			order = append(order, c.Queue)
		}
		qr.items = append(qr.items, i)
		if !qr.seen[c.Partition] {
			qr.seen[c.Partition] = true
			qr.names = append(qr.names, c.Partition)
		}
	}
	res := make([]*resolved, len(order))
	errs := make([]error, len(order))
	fanOut(len(order), func(k int) {
		q := order[k]
		ns, task := wire.QueueLabels(q)
		res[k], errs[k] = e.resolve(ctx, allocReq{tenant: tenant, queue: q, names: byQueue[q].names, create: true,
			namespace: ns, task: task, fresh: fresh, gone: gone[q]})
	})
	flags := e.PushFlags()
	batches := map[int]*groupBatch{}
	for k, q := range order {
		qr := byQueue[q]
		if errs[k] != nil {
			for _, i := range qr.items {
				out[i].Err = errs[k]
			}
			continue
		}
		r := res[k]
		byName := make(map[string]wire.DirEntry, len(r.parts))
		for _, d := range r.parts {
			byName[d.Name] = d
		}
		for g := range r.ensure {
			b := batchFor(batches, g)
			b.cmds = append(r.prep(g), b.cmds...)
		}
		// QueueEncryptedIn once per group the queue's commands go to, with
		// the home's catalog the resolve already read.
		sealIn := map[int]bool{}
		for _, i := range qr.items {
			c := cmds[i]
			d := byName[c.Partition]
			c.PartitionIndex, c.Inc = int32(d.Index), r.cat.Inc
			c.Flags |= flags
			seal, known := sealIn[int(d.Group)]
			if !known {
				seal = e.payloadKey != nil && (r.cat.Cfg.EncryptionEnabled || e.encryptedInGroup(tenant, q, int(d.Group)))
				sealIn[int(d.Group)] = seal
			}
			if seal {
				if err := e.sealPushRecords(&c); err != nil {
					out[i].Err = err
					continue
				}
			}
			b := batchFor(batches, int(d.Group))
			b.cmds = append(b.cmds, wire.Command{Kind: wire.KindPush, Body: c.Encode(nil)})
			b.items = append(b.items, i)
			if r.created {
				out[i].QueueCreated = true
			}
		}
	}
	return batches
}

func batchFor(m map[int]*groupBatch, g int) *groupBatch {
	b := m[g]
	if b == nil {
		b = &groupBatch{}
		m[g] = b
	}
	return b
}

// EnsureQueue creates a queue (with create) or finds it, with at least
// count partitions named by index, and makes sure each exists in its group,
// answering the catalog and those partitions. Kafka's auto-creation and
// metadata use it.
func (e *Engine) EnsureQueue(ctx context.Context, tenant wire.ID, queue string, count uint32, create, kafka bool) (wire.Catalog, []wire.DirEntry, error) {
	r, err := e.resolve(ctx, allocReq{tenant: tenant, queue: queue, count: count, create: create, kafka: kafka})
	if err != nil {
		return wire.Catalog{}, nil, err
	}
	if err := e.ensureShards(ctx, r); err != nil {
		return r.cat, r.parts, err
	}
	return r.cat, r.parts, nil
}
