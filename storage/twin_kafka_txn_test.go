package storage

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/queen-mq/queen/wire"
)

// Kafka transactions in a random twin workload (issue 32): two stores
// apply one workload of transactional ids initialised (fencing the last
// epoch, aborting its open transaction), transactions begun, batches
// staged to several partitions under the transaction's xid, ends that
// commit or abort (decide, resolve, settle, as the engine does them, the
// resolve and settle now or later by the finisher), epochs bumped by the
// timeout reaper, zombies of fenced epochs staging and ending late, a
// fenced transaction's resolve arriving after the next epoch's batches,
// idempotent and plain produces between, read_committed HTTP pops, ticks,
// time passing and restarts of one store. Both must answer alike and end
// with the same keys, and both must show a read_committed reader exactly
// what a model of the partitions' logs says: the records of committed
// transactions and plain produces, never one of an aborted or fenced
// transaction.
func TestTwinKafkaTransactions(t *testing.T) {
	eachSeed(t, 24, func(t *testing.T, seed int64) { newKafkaTwin(t, seed).run(300) })
}

const (
	ktTopic = "t"
	ktParts = 3
	ktTTLMs = 60000 // the producer state TTL produceCmd asks for
	ktGroup = "rc"  // the read_committed HTTP consumer
)

// kafkaTwin is the Kafka transaction workload and its model.
type kafkaTwin struct {
	*twinWorkload
	parts [ktParts]*ktPart
	xids  map[wire.ID]*ktXid
	txns  []*ktTxnID
	idem  int64 // the idempotent producer's id
	// idemSeq is its next sequence in each partition.
	idemSeq [ktParts]int32
	// pending are transactions ended at the coordinator whose resolve
	// and settle the engine's finisher makes later.
	pending []ktEnd
	// late are transactions aborted and settled before this group
	// resolved them (out of the engine's order): their resolve comes
	// after the next epoch's batches.
	late []wire.ID
	// ended are the transactions resolved here, for repeated resolves.
	ended []wire.ID
	// misread counts the batches a read_committed Kafka client reads
	// otherwise than the model after a late abort marker
	// (checkKafkaReader).
	misread int
}

// ktSpan is a batch or marker in a partition's log.
type ktSpan struct {
	from, to uint64
	producer int64
	xid      wire.ID // the transaction's; zero for a plain or idempotent batch
	marker   bool    // a COMMIT or ABORT marker of xid
	abort    bool    // an ABORT marker
}

// ktProducer is a producer's state in a partition as the store keeps it.
type ktProducer struct {
	epoch  int16
	next   int32
	lastMs int64
}

type ktPart struct {
	spans     []ktSpan
	next      uint64
	producers map[int64]*ktProducer
	// delivered is how many visible offsets the HTTP consumer took.
	delivered int
}

// ktXid is a transaction as this group sees it.
type ktXid struct {
	producer int64
	resolved bool // its markers are written
	commit   bool // as resolved
	late     bool // resolved after its transactional id settled
	parts    []int
}

// ktTxnID is a transactional id as its producer (the client) knows it.
type ktTxnID struct {
	name     string
	inited   bool
	producer int64
	epoch    int16
	// fenced says the coordinator bumped the epoch (a timeout): the
	// client must initialise again.
	fenced bool
	xid    wire.ID // the open transaction's, zero when none
	txnSeq uint64
	seq    map[int]int32
	failed bool // a batch was refused: the client aborts
	// reinit says the client initialises again (after it aborted a
	// transaction with a refused batch: its sequences are lost).
	reinit bool
	zombie *ktZombie
}

// ktZombie is the producer a transactional id had before its last
// fencing, still sending as it was.
type ktZombie struct {
	producer int64
	epoch    int16
	xid      wire.ID // its transaction open when fenced, zero when none
	txnSeq   uint64
	seq      map[int]int32
}

type ktEnd struct {
	txnID  string
	xid    wire.ID
	commit bool
}

func newKafkaTwin(t *testing.T, seed int64) *kafkaTwin {
	k := &kafkaTwin{twinWorkload: newTwinWorkload(t, seed), xids: map[wire.ID]*ktXid{}}
	for _, h := range []*harness{k.a, k.b} {
		h.allocTopic(ktTopic, ktParts)
	}
	for i := range k.parts {
		k.parts[i] = &ktPart{producers: map[int64]*ktProducer{}}
	}
	for i := range 2 {
		k.txns = append(k.txns, &ktTxnID{name: fmt.Sprintf("tx%d", i)})
	}
	k.initIdempotent()
	return k
}

func (k *kafkaTwin) run(steps int) {
	for range steps {
		tx := k.txns[k.r.Intn(len(k.txns))]
		switch op := k.r.Intn(100); {
		case op < 60:
			k.client(tx)
		case op < 68:
			k.produce()
		case op < 72:
			k.zombieStage()
		case op < 73:
			k.zombieEnd(tx)
		case op < 75:
			k.lateResolve()
		case op < 77:
			k.repeatResolve()
		case op < 81:
			k.finisher()
		case op < 90:
			k.popCommitted(k.r.Intn(ktParts))
		case op < 92:
			k.both(wire.KindTick, nil)
		case op < 97:
			k.advance(int64(k.r.Intn(2000)))
		case op < 98:
			k.advance(ktTTLMs) // producer states expire
		default:
			k.restartB()
		}
		k.check()
	}
	k.finishAll()
}

// client is the transactional id's producer's next step: an init when it
// has none or was fenced, a begin, a batch, an end; now and then an init
// fencing its open transaction, or the coordinator's timeout.
func (k *kafkaTwin) client(tx *ktTxnID) {
	op := k.r.Intn(100)
	switch {
	case !tx.inited || tx.reinit || (tx.fenced && op < 50) || op < 6:
		k.initTxnID(tx)
	case tx.xid.IsZero():
		k.begin(tx)
	case op < 8:
		k.timeout(tx)
	case op < 30 || tx.failed:
		k.end(tx)
	default:
		k.stage(tx)
	}
}

// produceBody is a produce of n fresh records to partition idx, built by
// the harness on both stores.
func (k *kafkaTwin) produceBody(idx int, producer int64, epoch int16, seq int32, n int) wire.KafkaProduceCmd {
	body := twinBody(k.twinWorkload, func(h *harness) []byte {
		c := h.produceCmd(ktTopic, int32(idx), producer, epoch, seq, n)
		return c.Encode(nil)
	})
	c, err := wire.DecodeKafkaProduceCmd(body)
	if err != nil {
		k.failf("produce body: %v", err)
	}
	return c
}

// expect is what the store answers a batch of producer at epoch with
// sequence seq in partition idx (checkSequence, with the model's producer
// states).
func (k *kafkaTwin) expect(idx int, producer int64, epoch int16, seq int32) wire.Code {
	st := k.parts[idx].producers[producer]
	if st != nil && k.a.now >= st.lastMs+ktTTLMs {
		st = nil // expired
	}
	switch {
	case st == nil || epoch > st.epoch:
		if seq != 0 {
			if st == nil {
				return wire.CodeUnknownProducer
			}
			return wire.CodeOutOfOrder
		}
	case epoch < st.epoch:
		return wire.CodeFenced
	case seq > st.next:
		return wire.CodeSequenceAhead
	case seq < st.next:
		return wire.CodeOutOfOrder
	}
	return wire.CodeOK
}

// appended notes a batch the store appended at base.
func (k *kafkaTwin) appended(idx int, base uint64, s ktSpan, epoch int16, seq int32) {
	part := k.parts[idx]
	if base != part.next {
		k.failf("a batch of partition %d appended at %d, the model's head is %d", idx, base, part.next)
	}
	s.from += part.next
	s.to += part.next
	part.spans = append(part.spans, s)
	part.next = s.to
	if s.producer != wire.NoProducer {
		part.producers[s.producer] = &ktProducer{epoch: epoch, next: seq + int32(s.to-s.from), lastMs: k.a.now}
	}
}

// retryBatch applies a batch's command again, as a client retry: the
// answer is a duplicate at the first one's offset.
func (k *kafkaTwin) retryBatch(kind wire.Kind, body []byte, base uint64) {
	r := twinApply(k.twinWorkload, kind, body, wire.DecodeKafkaProduceResult)
	if r.Code != wire.CodeDuplicate || r.BaseOffset != base {
		k.failf("a retried batch answered %+v, want a duplicate at %d", r, base)
	}
}

func (k *kafkaTwin) initIdempotent() {
	c := wire.InitProducerCmd{Tenant: wire.DefaultTenant}
	r := twinApply(k.twinWorkload, wire.KindKafkaInitProducer, c.Encode(nil), wire.DecodeInitProducerResult)
	if r.Code != wire.CodeOK {
		k.failf("init of an idempotent producer: %+v", r)
	}
	k.idem, k.idemSeq = r.ProducerID, [ktParts]int32{}
}

// produce is an idempotent producer's batch, or a plain one.
func (k *kafkaTwin) produce() {
	idx, n := k.r.Intn(ktParts), 1+k.r.Intn(3)
	producer, seq, want := k.idem, k.idemSeq[idx], wire.CodeOK
	if plain := k.r.Intn(4) == 0; plain {
		producer, seq = wire.NoProducer, 0
	} else {
		want = k.expect(idx, producer, 0, seq)
	}
	c := k.produceBody(idx, producer, 0, seq, n)
	body := c.Encode(nil)
	r := twinApply(k.twinWorkload, wire.KindKafkaProduce, body, wire.DecodeKafkaProduceResult)
	if r.Code != want {
		k.failf("a produce of %d records to %d by %d at %d answered %+v, want %v", n, idx, producer, seq, r, want)
	}
	if r.Code != wire.CodeOK {
		k.initIdempotent() // the client starts again with a new id
		return
	}
	k.appended(idx, r.BaseOffset, ktSpan{to: uint64(n), producer: producer}, 0, seq)
	if producer != wire.NoProducer {
		k.idemSeq[idx] += int32(n)
		if k.r.Intn(5) == 0 {
			k.retryBatch(wire.KindKafkaProduce, body, r.BaseOffset)
		}
	}
}

func (k *kafkaTwin) txnInfo(name string) (TxnInfo, bool) {
	ia, oka := k.a.s.KafkaTxn(wire.DefaultTenant, name)
	ib, okb := k.b.s.KafkaTxn(wire.DefaultTenant, name)
	if ia != ib || oka != okb {
		k.failf("transactional id %s: %+v | %+v", name, ia, ib)
	}
	return ia, oka
}

// initTxnID is InitProducerId for a transactional id, as the engine makes
// it: what is unsettled settled first, the init, then the transaction it
// aborted resolved and settled (or, out of order, settled first and
// resolved late).
func (k *kafkaTwin) initTxnID(tx *ktTxnID) {
	k.finishPendingOf(tx.name)
	before, had := k.txnInfo(tx.name)
	c := wire.InitProducerCmd{Tenant: wire.DefaultTenant, Transactional: true, TxnID: tx.name, TimeoutMs: 1000, ReqID: k.xid()}
	r := twinApply(k.twinWorkload, wire.KindKafkaInitProducer, c.Encode(nil), wire.DecodeInitProducerResult)
	if r.Code != wire.CodeOK || (had && (r.ProducerID != before.ProducerID || r.Epoch != before.Epoch+1)) {
		k.failf("init of %s answered %+v, its state before %+v", tx.name, r, before)
	}
	if k.r.Intn(4) == 0 {
		if again := twinApply(k.twinWorkload, wire.KindKafkaInitProducer, c.Encode(nil), wire.DecodeInitProducerResult); again != r {
			k.failf("a retried init answered %+v, the first %+v", again, r)
		}
	}
	after, _ := k.txnInfo(tx.name)
	if tx.inited {
		tx.zombie = &ktZombie{producer: tx.producer, epoch: tx.epoch, xid: tx.xid, txnSeq: tx.txnSeq, seq: tx.seq}
	}
	if xid := tx.xid; !xid.IsZero() {
		if after.Ongoing || after.LastCommitted || after.Unsettled != xid {
			k.failf("the init of %s left %+v, want its transaction aborted and unsettled", tx.name, after)
		}
		k.decideAbort(xid) // the engine's decisionOf: no decision was recorded
		if k.r.Intn(3) == 0 {
			k.xids[xid].late = true
			k.late = append(k.late, xid)
		} else {
			k.resolve(xid, false)
		}
		k.settle(tx.name, xid)
	} else if !after.Unsettled.IsZero() {
		k.failf("the init of %s, with nothing open, left %+v", tx.name, after)
	}
	tx.inited, tx.reinit, tx.fenced, tx.failed = true, false, false, false
	tx.producer, tx.epoch, tx.xid, tx.seq = r.ProducerID, r.Epoch, wire.ID{}, map[int]int32{}
}

func (k *kafkaTwin) decideAbort(xid wire.ID) {
	c := wire.XDecideCmd{ID: xid}
	if d := twinApply(k.twinWorkload, wire.KindXDecide, c.Encode(nil), wire.DecodeXDecideResult); d.Commit {
		k.failf("an abort decision of %s answered %+v", xid, d)
	}
}

// resolve resolves a transaction here, as its coordinator decided.
func (k *kafkaTwin) resolve(xid wire.ID, commit bool) {
	x := k.xids[xid]
	c := wire.XResolveCmd{ID: xid, Commit: commit}
	r := twinApply(k.twinWorkload, wire.KindXResolve, c.Encode(nil), wire.DecodeXResolveResult)
	want := wire.CodeConflict
	if commit {
		want = wire.CodeOK
	}
	if !x.resolved && len(x.parts) == 0 {
		want = wire.CodeNotFound // nothing of it here
	}
	if r.Code != want {
		k.failf("a resolve (commit %v) of %s answered %+v, want %v", commit, xid, r, want)
	}
	if x.resolved {
		if x.commit != commit {
			k.failf("%s resolved again the other way", xid)
		}
		return
	}
	x.resolved, x.commit = true, commit
	k.ended = append(k.ended, xid)
	for _, idx := range x.parts {
		part := k.parts[idx]
		part.spans = append(part.spans, ktSpan{from: part.next, to: part.next + 1, producer: x.producer, xid: xid, marker: true, abort: !commit})
		part.next++
	}
}

// settle lets a transactional id begin its next transaction.
func (k *kafkaTwin) settle(name string, xid wire.ID) {
	c := wire.TxnSettledCmd{Tenant: wire.DefaultTenant, TxnID: name, XID: xid}
	if r := twinApply(k.twinWorkload, wire.KindKafkaTxnSettled, c.Encode(nil), wire.DecodeCodeResult); r.Code != wire.CodeOK {
		k.failf("settle of %s: %+v", name, r)
	}
	if info, _ := k.txnInfo(name); info.Unsettled == xid {
		k.failf("%s still unsettled after its settle: %+v", name, info)
	}
}

// ended resolves and settles a transaction its coordinator ended, now or
// later (the finisher).
func (k *kafkaTwin) endedTxn(name string, xid wire.ID, commit bool) {
	if k.r.Intn(3) == 0 {
		k.pending = append(k.pending, ktEnd{txnID: name, xid: xid, commit: commit})
		return
	}
	k.resolve(xid, commit)
	k.settle(name, xid)
}

func (k *kafkaTwin) finisher() {
	if len(k.pending) == 0 {
		return
	}
	e := k.pending[0]
	k.pending = k.pending[1:]
	k.resolve(e.xid, e.commit)
	k.settle(e.txnID, e.xid)
}

func (k *kafkaTwin) finishPendingOf(name string) {
	for i := 0; i < len(k.pending); {
		if e := k.pending[i]; e.txnID == name {
			k.pending = slices.Delete(k.pending, i, i+1)
			k.resolve(e.xid, e.commit)
			k.settle(e.txnID, e.xid)
			continue
		}
		i++
	}
}

func (k *kafkaTwin) unsettledOf(name string) bool {
	return slices.ContainsFunc(k.pending, func(e ktEnd) bool { return e.txnID == name })
}

func (k *kafkaTwin) begin(tx *ktTxnID) {
	if !tx.inited || !tx.xid.IsZero() {
		return
	}
	before, _ := k.txnInfo(tx.name)
	c := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: tx.name, ProducerID: tx.producer, Epoch: tx.epoch, Groups: 1}
	r := twinApply(k.twinWorkload, wire.KindKafkaTxnBegin, c.Encode(nil), wire.DecodeKafkaTxnResult)
	want := wire.CodeOK
	switch {
	case tx.fenced:
		want = wire.CodeFenced
	case k.unsettledOf(tx.name):
		want = wire.CodeTxnUnsettled
	}
	if r.Code != want || (want == wire.CodeOK && r.TxnSeq != before.TxnSeq+1) {
		k.failf("a begin of %s answered %+v, want %v after %+v", tx.name, r, want, before)
	}
	if r.Code != wire.CodeOK {
		return
	}
	after, _ := k.txnInfo(tx.name)
	tx.xid, tx.txnSeq = KafkaTxnXID(after), r.TxnSeq
	k.xids[tx.xid] = &ktXid{producer: tx.producer}
	if k.r.Intn(5) == 0 {
		if again := twinApply(k.twinWorkload, wire.KindKafkaTxnBegin, c.Encode(nil), wire.DecodeKafkaTxnResult); again != r {
			k.failf("a repeated begin answered %+v, the first %+v", again, r)
		}
	}
}

// stageBatch stages a batch of n records to partition idx for transaction
// xid of producer at epoch and answers whether it was appended.
func (k *kafkaTwin) stageBatch(name string, xid wire.ID, producer int64, epoch int16, seq map[int]int32) bool {
	idx, n := k.r.Intn(ktParts), 1+k.r.Intn(3)
	x := k.xids[xid]
	want := k.expect(idx, producer, epoch, seq[idx])
	if x.resolved {
		want = wire.CodeConflict // a piece of a transaction already ended here
	}
	c := wire.KafkaStageCmd{XID: xid, Coord: 0, DeadlineMs: k.a.now + 60000, TxnID: name,
		Produce: k.produceBody(idx, producer, epoch, seq[idx], n)}
	body := c.Encode(nil)
	r := twinApply(k.twinWorkload, wire.KindKafkaStage, body, wire.DecodeKafkaProduceResult)
	if r.Code != want {
		k.failf("a stage of %d records of %s (producer %d epoch %d seq %d) to %d answered %+v, want %v",
			n, xid, producer, epoch, seq[idx], idx, r, want)
	}
	if r.Code != wire.CodeOK {
		return false
	}
	k.appended(idx, r.BaseOffset, ktSpan{to: uint64(n), producer: producer, xid: xid}, epoch, seq[idx])
	seq[idx] += int32(n)
	if !slices.Contains(x.parts, idx) {
		x.parts = append(x.parts, idx)
	}
	if k.r.Intn(5) == 0 {
		k.retryBatch(wire.KindKafkaStage, body, r.BaseOffset)
	}
	return true
}

func (k *kafkaTwin) stage(tx *ktTxnID) {
	if tx.xid.IsZero() || tx.failed {
		return
	}
	if !k.stageBatch(tx.name, tx.xid, tx.producer, tx.epoch, tx.seq) {
		tx.failed = true // the client aborts
	}
}

// decideEnd records the coordinator's decision with its EndTxn, as the
// engine's TxnEnd does, and answers it.
func (k *kafkaTwin) decideEnd(xid wire.ID, c wire.TxnEndCmd) (bool, wire.KafkaTxnResult) {
	c.Tenant = wire.DefaultTenant
	d := wire.XDecideCmd{ID: xid, Commit: c.Commit, Participants: []uint16{0}, Own: wire.Command{Kind: wire.KindKafkaTxnEnd, Body: c.Encode(nil)}}
	dr := twinApply(k.twinWorkload, wire.KindXDecide, d.Encode(nil), wire.DecodeXDecideResult)
	own, err := wire.DecodeKafkaTxnResult(dr.Own)
	if err != nil {
		k.failf("an end's own result: %v", err)
	}
	return dr.Commit, own
}

func (k *kafkaTwin) end(tx *ktTxnID) {
	if tx.xid.IsZero() {
		return
	}
	xid := tx.xid
	commit := !tx.failed && k.r.Intn(3) != 0
	gaveUp := k.r.Intn(10) == 0 // a participant recorded an abort first
	if gaveUp {
		k.decideAbort(xid)
	}
	end := wire.TxnEndCmd{TxnID: tx.name, ProducerID: tx.producer, Epoch: tx.epoch, TxnSeq: tx.txnSeq, Commit: commit}
	committed, own := k.decideEnd(xid, end)
	if committed != (commit && !gaveUp) || own.Code != wire.CodeOK {
		k.failf("an end (commit %v, gave up %v) of %s decided commit %v, own %+v", commit, gaveUp, xid, committed, own)
	}
	if k.r.Intn(5) == 0 {
		if again, own := k.decideEnd(xid, end); again != committed || own.Code != wire.CodeOK {
			k.failf("a repeated end decided commit %v, own %+v", again, own)
		}
	}
	if info, _ := k.txnInfo(tx.name); info.Ongoing || info.LastCommitted != committed || info.Unsettled != xid {
		k.failf("after the end of %s: %+v", xid, info)
	}
	tx.xid, tx.failed, tx.reinit = wire.ID{}, false, tx.failed
	k.endedTxn(tx.name, xid, committed)
}

// timeout is the coordinator's reaper: the open transaction aborted and
// the epoch bumped, which fences the producer.
func (k *kafkaTwin) timeout(tx *ktTxnID) {
	if tx.xid.IsZero() {
		return
	}
	xid := tx.xid
	end := wire.TxnEndCmd{TxnID: tx.name, ProducerID: tx.producer, Epoch: tx.epoch, TxnSeq: tx.txnSeq, BumpEpoch: true}
	committed, own := k.decideEnd(xid, end)
	if committed || own.Code != wire.CodeOK || own.Epoch != tx.epoch+1 {
		k.failf("a timeout of %s decided commit %v, own %+v", xid, committed, own)
	}
	tx.zombie = &ktZombie{producer: tx.producer, epoch: tx.epoch, xid: xid, txnSeq: tx.txnSeq, seq: tx.seq}
	tx.xid, tx.fenced, tx.failed = wire.ID{}, true, false
	k.endedTxn(tx.name, xid, false)
}

// zombieStage is a batch of a fenced producer's transaction, staged late
// (a transaction not yet resolved here first): refused once the
// transaction is resolved here, else appended, to be aborted by its
// resolve.
func (k *kafkaTwin) zombieStage() {
	var zs []*ktTxnID
	for _, tx := range k.txns {
		if z := tx.zombie; z != nil && !z.xid.IsZero() && !k.xids[z.xid].resolved {
			zs = append(zs, tx)
		}
	}
	if len(zs) == 0 {
		zs = k.txns
	}
	tx := zs[k.r.Intn(len(zs))]
	if z := tx.zombie; z != nil && !z.xid.IsZero() {
		k.stageBatch(tx.name, z.xid, z.producer, z.epoch, z.seq)
	}
}

// zombieEnd is a fenced producer's commit: never a commit, and nothing
// changes in the log.
func (k *kafkaTwin) zombieEnd(tx *ktTxnID) {
	z := tx.zombie
	if z == nil || z.xid.IsZero() {
		return
	}
	heads := k.heads()
	end := wire.TxnEndCmd{TxnID: tx.name, ProducerID: z.producer, Epoch: z.epoch, TxnSeq: z.txnSeq, Commit: true}
	if committed, own := k.decideEnd(z.xid, end); committed {
		k.failf("a fenced producer's end committed %s: %+v", z.xid, own)
	}
	if slices.Compare(heads, k.heads()) != 0 {
		k.failf("a fenced producer's end wrote to the log")
	}
	begin := wire.TxnBeginCmd{Tenant: wire.DefaultTenant, TxnID: tx.name, ProducerID: z.producer, Epoch: z.epoch, Groups: 1}
	if r := twinApply(k.twinWorkload, wire.KindKafkaTxnBegin, begin.Encode(nil), wire.DecodeKafkaTxnResult); r.Code != wire.CodeFenced {
		k.failf("a fenced producer's begin answered %+v", r)
	}
}

// heads is every partition's head in the first store.
func (k *kafkaTwin) heads() []uint64 {
	var out []uint64
	for i := range ktParts {
		p, _ := k.a.s.PartitionByIndex(wire.DefaultTenant, ktTopic, uint32(i))
		out = append(out, p.HighWatermark())
	}
	return out
}

func (k *kafkaTwin) lateResolve() {
	if xid, ok := takeAny(k.twinWorkload, &k.late); ok {
		k.resolve(xid, false)
	}
}

// repeatResolve resolves an ended transaction again (the finisher, a
// retried proposal): answered as the first was, nothing written.
func (k *kafkaTwin) repeatResolve() {
	if len(k.ended) == 0 {
		return
	}
	xid := k.ended[k.r.Intn(len(k.ended))]
	heads := k.heads()
	k.resolve(xid, k.xids[xid].commit)
	if slices.Compare(heads, k.heads()) != 0 {
		k.failf("a repeated resolve of %s wrote to the log", xid)
	}
}

// visible reports whether the model lets a read_committed reader see a
// batch.
func (k *kafkaTwin) visible(s ktSpan) bool {
	if s.marker {
		return false
	}
	if s.xid.IsZero() {
		return true
	}
	x := k.xids[s.xid]
	return x.resolved && x.commit
}

// lastStable is the model's last stable offset of a partition: the first
// batch of a transaction not resolved here.
func (k *kafkaTwin) lastStable(part *ktPart) uint64 {
	for _, s := range part.spans {
		if !s.xid.IsZero() && !k.xids[s.xid].resolved {
			return s.from
		}
	}
	return part.next
}

// visibleOffsets are the offsets below the last stable offset a
// read_committed reader gets, in order.
func (k *kafkaTwin) visibleOffsets(part *ktPart) []uint64 {
	ls := k.lastStable(part)
	var out []uint64
	for _, s := range part.spans {
		if s.from >= ls {
			break
		}
		if k.visible(s) {
			for o := s.from; o < s.to; o++ {
				out = append(out, o)
			}
		}
	}
	return out
}

// popCommitted pops partition idx as the read_committed HTTP consumer:
// it must get the next visible offsets, in order, and nothing else.
func (k *kafkaTwin) popCommitted(idx int) int {
	part := k.parts[idx]
	c := wire.PopCmd{Tenant: wire.DefaultTenant, Queue: ktTopic, Group: ktGroup, Partition: fmt.Sprint(idx),
		Batch: uint32(1 + k.r.Intn(20)), SubMode: wire.SubAll, CommitOnDelivery: true}
	r := twinApply(k.twinWorkload, wire.KindPop, c.Encode(nil), wire.DecodePopResult)
	vis := k.visibleOffsets(part)
	n := 0
	for _, cl := range r.Claims {
		for o := cl.From; o < cl.To; o++ {
			if part.delivered >= len(vis) || vis[part.delivered] != o {
				k.failf("partition %d: a read_committed pop got offset %d, the model's next visible ones are %v (spans %+v)",
					idx, o, vis[min(part.delivered, len(vis)):], part.spans)
			}
			part.delivered++
			n++
		}
	}
	return n
}

// check compares both stores' transaction views of every partition with
// the model.
func (k *kafkaTwin) check() {
	k.stores(func(name string, h *harness) {
		for idx, part := range k.parts {
			p, ok := h.s.PartitionByIndex(wire.DefaultTenant, ktTopic, uint32(idx))
			if !ok || p.HighWatermark() != part.next {
				k.failf("%s store: partition %d has head %d, the model %d", name, idx, p.HighWatermark(), part.next)
			}
			v := h.s.Txns(p, 0, part.next)
			ls := k.lastStable(part)
			skips, aborted := k.expectedView(part, ls)
			if v.LastStable != ls || fmt.Sprint(v.Skips) != fmt.Sprint(skips) || fmt.Sprint(v.Aborted) != fmt.Sprint(aborted) {
				k.failf("%s store: partition %d's view %+v, the model's {LastStable:%d Aborted:%v Skips:%v} (spans %+v)",
					name, idx, v, ls, aborted, skips, part.spans)
			}
			k.checkKafkaReader(name, idx, part, v)
		}
	})
}

// expectedView is what Txns must answer of a partition below ls: the
// skipped ranges (aborted batches and markers) and the aborted
// transactions (first batch, marker).
func (k *kafkaTwin) expectedView(part *ktPart, ls uint64) ([]wire.OffsetRange, []AbortedTxn) {
	var skips []wire.OffsetRange
	var aborted []AbortedTxn
	for _, s := range part.spans {
		if s.from < ls && !k.visible(s) && (s.marker || k.xids[s.xid].resolved) {
			skips = append(skips, wire.OffsetRange{From: s.from, To: s.to})
		}
		if s.abort {
			if first := k.firstBatch(part, s.xid); first < ls {
				aborted = append(aborted, AbortedTxn{ProducerID: s.producer, First: first, Last: s.from})
			}
		}
	}
	return skips, aborted
}

// checkKafkaReader reads a partition below its last stable offset as a
// read_committed Kafka consumer does with the aborted list (a producer's
// transactional batches are dropped from an aborted transaction's first
// offset to its ABORT marker): it must drop every batch of an aborted
// transaction and keep every other one. Not checked: the batches of a
// producer after a transaction of it resolved late, when another of its
// transactions wrote between that one's first batch and its marker; the
// aborted list cannot say which batches that marker ends (Kafka's format
// has no more), and the engine's settle keeps markers from coming late.
// HTTP readers are checked there too (the skipped ranges and the pops).
func (k *kafkaTwin) checkKafkaReader(name string, idx int, part *ktPart, v TxnView) {
	// Kafka's consumer takes them by first offset.
	byFirst := slices.SortedFunc(slices.Values(v.Aborted), func(a, b AbortedTxn) int { return cmp.Compare(a.First, b.First) })
	abortedBy := map[int64]bool{}
	next := 0
	for _, s := range part.spans {
		if s.from >= v.LastStable {
			break
		}
		for next < len(byFirst) && byFirst[next].First < s.to {
			abortedBy[byFirst[next].ProducerID] = true
			next++
		}
		if s.marker {
			if s.abort {
				delete(abortedBy, s.producer)
			}
			continue
		}
		kept := s.xid.IsZero() || !abortedBy[s.producer]
		switch {
		case kept == k.visible(s):
		case k.afterLateInterleaved(part, s):
			k.misread++
		default:
			k.failf("%s store: partition %d: a read_committed Kafka client keeps %v the batch %+v (aborted list %+v, spans %+v)",
				name, idx, kept, s, v.Aborted, part.spans)
		}
	}
}

// afterLateInterleaved reports whether s, a transactional batch, follows
// the first batch of a transaction of its producer that was resolved late
// (after its transactional id settled) while another transaction of that
// producer wrote before its ABORT marker.
func (k *kafkaTwin) afterLateInterleaved(part *ktPart, s ktSpan) bool {
	for _, m := range part.spans {
		if !m.abort || m.producer != s.producer || m.xid == s.xid || !k.xids[m.xid].late {
			continue
		}
		first := k.firstBatch(part, m.xid)
		interleaved := slices.ContainsFunc(part.spans, func(b ktSpan) bool {
			return !b.marker && b.producer == m.producer && !b.xid.IsZero() && b.xid != m.xid && b.from > first && b.from < m.from
		})
		if interleaved && first < s.from {
			return true
		}
	}
	return false
}

// firstBatch is the offset of transaction xid's first batch in part.
func (k *kafkaTwin) firstBatch(part *ktPart, xid wire.ID) uint64 {
	return part.spans[slices.IndexFunc(part.spans, func(b ktSpan) bool { return b.xid == xid })].from
}

// finishAll ends what is open the engine's way, then reads every
// partition to its end as the read_committed HTTP consumer: it must have
// had every visible record, and the stores must hold the same keys.
func (k *kafkaTwin) finishAll() {
	for len(k.pending) > 0 {
		k.finisher()
	}
	for len(k.late) > 0 {
		k.lateResolve()
	}
	for _, tx := range k.txns {
		if xid := tx.xid; !xid.IsZero() {
			end := wire.TxnEndCmd{TxnID: tx.name, ProducerID: tx.producer, Epoch: tx.epoch, TxnSeq: tx.txnSeq, Commit: !tx.failed}
			committed, _ := k.decideEnd(xid, end)
			k.resolve(xid, committed)
			k.settle(tx.name, xid)
		}
	}
	// A zombie's batches staged after its transaction's abort decision
	// (and before any resolve) are resolved by then.
	for idx, part := range k.parts {
		if ls := k.lastStable(part); ls != part.next {
			k.failf("partition %d: every transaction is resolved, yet the model's last stable offset is %d of %d", idx, ls, part.next)
		}
		for range len(part.spans) + 2 {
			k.popCommitted(idx)
		}
		if vis := k.visibleOffsets(part); part.delivered != len(vis) {
			k.failf("partition %d: the read_committed consumer got %d records of %d", idx, part.delivered, len(vis))
		}
	}
	k.check()
	k.sameKeys()
	if k.misread > 0 {
		k.t.Logf("%d batch reads after a late abort marker were not checked against the model", k.misread)
	}
}
