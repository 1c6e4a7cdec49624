package storage

import (
	"sync"

	"github.com/queen-mq/queen/wire"
)

// txnOffsets maps the transaction ids of a run of records (explicit, or the
// message id's text) to the first offset holding each: what an ack names
// a message by.
type txnOffsets map[string]uint64

// add is a RecordFunc indexing one record.
func (idx txnOffsets) add(off uint64, _ int64, body []byte) bool {
	h, err := wire.ParseRecordHead(body)
	if err != nil {
		return true
	}
	key := h.MsgID.String()
	if explicit, id := h.TxnKey(); explicit {
		key = string(id)
	}
	if _, dup := idx[key]; !dup {
		idx[key] = off
	}
	return true
}

// ResolveAckOffsets finds, in this replica's committed records, the offset
// of each item of c that names the live lease of its partition, and marks
// the item resolved (wire.AckItem.Resolved): the group's apply loop then
// acknowledges it without reading, and so does every other replica. It runs
// in the proposing request, beside other requests, where the apply loop is
// one per group and runs on every replica. An item it cannot resolve (its
// lease is not here yet, a record not committed yet) is left to the apply
// loop, which reads as before; nothing else changes what an ack does.
func (s *Store) ResolveAckOffsets(c *wire.AckCmd) {
	type leased struct {
		p        Partition
		id       wire.ID
		from, to uint64
		items    []int // indexes in c.Items
	}
	type leaseAt struct {
		id  wire.ID
		pid uint64
	}
	var leases []leased
	byID := map[leaseAt]int{} // a partition's lease (a shared id is several partitions') → index in leases
	s.mu.RLock()
	for i := range c.Items {
		it := &c.Items[i]
		p := s.parts[it.PartitionID]
		if it.Resolved || it.LeaseID.IsZero() || p == nil || p.q.tenant != c.Tenant {
			continue
		}
		cur := p.cursors.get(c.Group)
		if cur == nil || cur.lease == nil || cur.lease.id != it.LeaseID {
			continue
		}
		at := leaseAt{it.LeaseID, p.id}
		k, ok := byID[at]
		if !ok {
			k = len(leases)
			byID[at] = k
			leases = append(leases, leased{p: s.handle(p), id: it.LeaseID, from: cur.lease.from, to: cur.lease.to})
		}
		leases[k].items = append(leases[k].items, i)
	}
	s.mu.RUnlock()
	var r *RangeReader // for leases this node did not answer, one for all
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	for _, l := range leases {
		idx := s.answered.get(l.id, l.p.ID, l.from, l.to)
		if idx == nil {
			if r == nil {
				var err error
				if r, err = s.NewRangeReader(); err != nil {
					return
				}
			}
			idx = make(txnOffsets, l.to-l.from)
			if r.Read(l.p, l.from, l.to, idx.add) != nil {
				continue
			}
		}
		for _, i := range l.items {
			it := &c.Items[i]
			if off, ok := idx[string(it.TxnID)]; ok {
				it.Resolved, it.Offset, it.LeaseFrom, it.LeaseTo = true, off, l.from, l.to
			}
		}
	}
}

// RangeReader reads ranges of several partitions of one store through one
// pair of index iterators: a pop answer reads a range in each of up to
// dozens of partitions, and making and closing iterators for each was
// much of what the answer cost. It reads the records committed when it
// was made (its iterators' view) and holds the store's database open
// until Close: use one for one answer, not longer.
type RangeReader struct {
	s  *Store
	ci *chunkIter
}

// NewRangeReader returns a reader of s's committed records.
func (s *Store) NewRangeReader() (*RangeReader, error) {
	s.dbMu.RLock()
	if s.db == nil {
		s.dbMu.RUnlock()
		return nil, ErrClosed
	}
	return &RangeReader{s: s}, nil
}

// Read calls f for the committed records of p in [from, to), as
// Store.ReadRange.
func (r *RangeReader) Read(p Partition, from, to uint64, f RecordFunc) error {
	if hwm := p.HighWatermark(); to > hwm {
		to = hwm
	}
	if from >= to {
		return nil
	}
	if r.ci == nil {
		r.ci = newChunkIter(r.s.db, r.s.segs, p.ID)
	} else {
		r.ci.retarget(p.ID)
	}
	if err := r.ci.readRecords(from, to, f); err != nil {
		return err
	}
	return r.ci.err
}

// ReadLease reads the records [from, to) of p a pop leased under leaseID,
// as Read, and remembers their transaction ids: the consumer's acks of
// that lease, which usually come back to the node that answered the pop,
// are then resolved without reading the records again
// (ResolveAckOffsets).
func (r *RangeReader) ReadLease(p Partition, leaseID wire.ID, from, to uint64, f RecordFunc) error {
	var idx txnOffsets
	whole := true // f took every record: idx is the lease's
	if !leaseID.IsZero() && from < to && to <= p.HighWatermark() {
		idx = make(txnOffsets, to-from)
		each := f
		f = func(off uint64, appendMs int64, body []byte) bool {
			idx.add(off, appendMs, body)
			whole = each(off, appendMs, body)
			return whole
		}
	}
	err := r.Read(p, from, to, f)
	if err == nil && whole && len(idx) > 0 {
		r.s.answered.put(leaseID, p.ID, from, to, idx)
	}
	return err
}

// Close releases the iterators and the database.
func (r *RangeReader) Close() {
	if r.ci != nil {
		_ = r.ci.Close()
		r.ci = nil
	}
	r.s.dbMu.RUnlock()
}

// leaseTxnCache holds the transaction ids of recently answered leases, up
// to leaseCacheBytes of them (estimated), the oldest leases forgotten
// first: an ack comes back within a lease time or not at all, and one that
// finds nothing here reads, as it would without the cache.
type leaseTxnCache struct {
	mu    sync.Mutex
	byID  map[leaseKey]*leaseTxns
	order []leaseKey // oldest first
	held  int        // estimated bytes
}

// leaseKey names one partition's lease: a shared lease id is held by
// several partitions, each answered and acknowledged on its own.
type leaseKey struct {
	id  wire.ID
	pid uint64
}

type leaseTxns struct {
	pid, from, to uint64
	idx           txnOffsets
	cost          int
}

// leaseCacheBytes bounds each store's cache (part of the memory budget's
// "requests in flight").
const leaseCacheBytes = 8 << 20

func (c *leaseTxnCache) put(id wire.ID, pid, from, to uint64, idx txnOffsets) {
	cost := 256 // the entry, its map header and the order slot
	for k := range idx {
		cost += len(k) + 48
	}
	if cost > leaseCacheBytes/8 {
		return // a lease that large is read again rather than crowd out the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[leaseKey]*leaseTxns{}
	}
	k := leaseKey{id, pid}
	if old := c.byID[k]; old != nil {
		c.held -= old.cost // a retried pop's lease id, answered again
	} else {
		c.order = append(c.order, k)
	}
	c.byID[k] = &leaseTxns{pid, from, to, idx, cost}
	c.held += cost
	for c.held > leaseCacheBytes && len(c.order) > 0 {
		if old := c.byID[c.order[0]]; old != nil {
			c.held -= old.cost
			delete(c.byID, c.order[0])
		}
		c.order = c.order[1:]
	}
}

// get returns the ids of lease id over [from, to) of partition pid, or nil.
func (c *leaseTxnCache) get(id wire.ID, pid, from, to uint64) txnOffsets {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.byID[leaseKey{id, pid}]; l != nil && l.from == from && l.to == to {
		return l.idx
	}
	return nil
}
