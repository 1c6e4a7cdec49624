package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/queen-mq/queen/wire"
)

// A standby installs a source group's snapshot through its own log
// (wire/link_snapshot.go): chunks are staged in the store itself, under
// linkChunkPrefix, so they are in the standby's own raft snapshots and
// survive restarts, and every replica has staged the same bytes when the
// Done entry comes. The Done entry then replaces the store with the
// staged stream at exactly its own position in the log: Update ends the
// batch before it (updateRun), commits, and installs through
// RecoverFromSnapshot, the path a lagging replica recovers by, writing the
// group's own applied index, format and link state into the new store
// with the source's keys. Until the new store is current the old one says
// the entry before Done was the last applied, so a crash in between
// applies Done again from the raft log.

var (
	// keyLinkStage holds the install being staged (linkStage).
	keyLinkStage = []byte{tagCounters, 'i'}
	// linkChunkPrefix + install id + seq → a staged chunk's bytes.
	linkChunkPrefix = []byte{tagCounters, 'j'}
)

func linkChunkKey(id, seq uint64) []byte {
	k := append([]byte{}, linkChunkPrefix...)
	k = binary.BigEndian.AppendUint64(k, id)
	return binary.BigEndian.AppendUint64(k, seq)
}

// linkStage is the staged install: its id, the next chunk expected, and
// the bytes and CRC-32C of those staged.
type linkStage struct {
	ID, Next, Bytes uint64
	CRC             uint32
}

func (l *linkStage) encode() []byte {
	w := wire.Writer{}
	w.U64(l.ID)
	w.Uvarint(l.Next)
	w.Uvarint(l.Bytes)
	w.Uvarint(uint64(l.CRC))
	return w.B
}

func decodeLinkStage(b []byte) (linkStage, error) {
	r := wire.NewReader(b)
	l := linkStage{ID: r.U64(), Next: r.Uvarint(), Bytes: r.Uvarint(), CRC: uint32(r.Uvarint())}
	return l, r.Done()
}

// linkStageNow is the staged install of the current store generation.
func (s *Store) linkStageNow() (*linkStage, error) {
	g := &s.linkGate
	if gen := s.recovered.Load() + 1; g.stageGen != gen {
		g.stage, g.stageGen = nil, 0
		b, closer, err := s.db.Get(keyLinkStage)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("storage: read the staged link snapshot: %w", err)
		default:
			st, derr := decodeLinkStage(b)
			_ = closer.Close()
			if derr != nil {
				return nil, fmt.Errorf("storage: staged link snapshot: %w", derr)
			}
			g.stage = &st
		}
		g.stageGen = gen
	}
	return g.stage, nil
}

// linkInstallsAt reports whether the raft entry cmd installs the staged
// source snapshot: its only command is a LinkSnapshotDone matching every
// chunk staged. On a store with nothing staged it costs a comparison.
func (s *Store) linkInstallsAt(cmd []byte) bool {
	st, err := s.linkStageNow()
	if st == nil || err != nil || !s.at(wire.FormatV7) || s.Link().Promoted {
		return false
	}
	d, ok := onlyLinkDone(cmd)
	return ok && d.ID == st.ID && d.Chunks == st.Next && d.Bytes == st.Bytes && d.CRC == st.CRC
}

// onlyLinkDone decodes an entry made of one LinkSnapshotDone command.
func onlyLinkDone(cmd []byte) (wire.LinkSnapshotDoneCmd, bool) {
	e, err := wire.ParseEntry(cmd)
	if err != nil || e.Count != 1 {
		return wire.LinkSnapshotDoneCmd{}, false
	}
	c, ok := e.Next()
	if !ok || c.Kind != wire.KindLinkSnapshotDone {
		return wire.LinkSnapshotDoneCmd{}, false
	}
	d, err := wire.DecodeLinkSnapshotDoneCmd(c.Body)
	return d, err == nil
}

// applyLinkSnapshotChunk stages one chunk: Seq 0 starts install ID over
// (dropping what another left), a later one must be the next piece of
// the staged install; anything else is answered CodeConflict with the
// next piece expected (0: start over).
func (s *Store) applyLinkSnapshotChunk(ctx *applyCtx, c *wire.LinkSnapshotChunkCmd) wire.CountResult {
	if !s.at(wire.FormatV7) || ctx.linking {
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	if s.Link().Promoted {
		return wire.CountResult{Code: wire.CodeConflict}
	}
	st, err := s.linkStageNow()
	if err != nil {
		ctx.fail(err)
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	var next linkStage
	switch {
	case c.Seq == 0:
		if st != nil {
			_ = ctx.b.DeleteRange(linkChunkPrefix, prefixEnd(linkChunkPrefix), nil)
		}
		next = linkStage{ID: c.ID}
	case st == nil || st.ID != c.ID || c.Seq != st.Next:
		if st != nil && st.ID == c.ID {
			return wire.CountResult{Code: wire.CodeConflict, N: st.Next}
		}
		return wire.CountResult{Code: wire.CodeConflict}
	default:
		next = *st
	}
	ctx.set(linkChunkKey(c.ID, c.Seq), c.Data)
	next.Next, next.Bytes = c.Seq+1, next.Bytes+uint64(len(c.Data))
	next.CRC = crc32.Update(next.CRC, castagnoli, c.Data)
	ctx.set(keyLinkStage, next.encode())
	s.linkGate.stage = &next
	return wire.CountResult{Code: wire.CodeOK, N: next.Next}
}

// applyLinkSnapshotDone is a Done that does not install (linkInstallsAt
// caught every one that does): chunks missing or another install's, or
// an entry carrying other commands besides it. CodeConflict, with the
// next chunk the staged install expects.
func (s *Store) applyLinkSnapshotDone(ctx *applyCtx, c *wire.LinkSnapshotDoneCmd) wire.CountResult {
	if !s.at(wire.FormatV7) || ctx.linking {
		return wire.CountResult{Code: wire.CodeBadRequest}
	}
	if st, _ := s.linkStageNow(); st != nil && st.ID == c.ID {
		return wire.CountResult{Code: wire.CodeConflict, N: st.Next}
	}
	return wire.CountResult{Code: wire.CodeConflict}
}

// installLinkSnapshot replaces the store with the staged source snapshot
// that raft entry e (linkInstallsAt) installs, and answers it.
func (s *Store) installLinkSnapshot(e *sm.Entry) error {
	d, _ := onlyLinkDone(e.Cmd)
	began := time.Now()
	s.waitSnapshotsDone()
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := s.writeLinkStaged(pw, &d, e.Index)
		pw.CloseWithError(err)
		written <- err
	}()
	err := s.RecoverFromSnapshot(pr, nil)
	_ = pr.CloseWithError(errors.New("storage: install ended"))
	werr := <-written
	if err != nil {
		if werr != nil {
			err = werr
		}
		s.diverged.Store(true)
		return fmt.Errorf("storage: install the source snapshot at source index %d: %w", d.SourceIndex, err)
	}
	s.linkGate.stage, s.linkGate.stageGen = nil, 0
	e.Result = sm.Result{Value: e.Index, Data: wire.AppendResults(nil, [][]byte{wire.CountResult{Code: wire.CodeOK, N: d.SourceIndex}.Encode(nil)})}
	s.log.Info("storage: standby group installed a source snapshot", "group", s.cfg.Group, "sourceIndex", d.SourceIndex,
		"bytes", d.Bytes, "index", e.Index, "ms", time.Since(began).Milliseconds())
	return nil
}

// waitSnapshotsDone waits until no snapshot reads the store: link copies
// are asked to stop, and a raft snapshot dragonboat is streaming to a peer
// (which pins the segments) is waited for, since the install closes the
// database and segments they read. Dragonboat takes no new one while an
// Update runs.
func (s *Store) waitSnapshotsDone() {
	release := s.linkGate.exclude()
	defer release()
	for since := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		s.segs.mu.Lock()
		pins := s.segs.pins
		s.segs.mu.Unlock()
		if pins == 0 {
			return
		}
		if time.Since(since) > 10*time.Second {
			s.log.Warn("storage: a standby's snapshot install waits for a raft snapshot being sent to a peer", "group", s.cfg.Group)
			since = time.Now()
		}
	}
}

// writeLinkStaged writes the staged stream to w as a snapshot stream of
// this group: the source's keys, but the applied index (index, the Done
// entry's), the active format (this group's own) and the link state (the
// source's clock and format, following from SourceIndex), the stage's
// own keys left out.
func (s *Store) writeLinkStaged(w io.Writer, d *wire.LinkSnapshotDoneCmd, index uint64) error {
	own, err := s.ownRegistries()
	if err != nil {
		return err
	}
	it := s.db.NewIter(&pebble.IterOptions{LowerBound: linkChunkKey(d.ID, 0), UpperBound: linkChunkKey(d.ID, d.Chunks)})
	cr := &chunkReader{it: it}
	cr.valid = it.First()
	r := bufio.NewReaderSize(cr, 1<<20)
	bw := bufio.NewWriterSize(w, 1<<20)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != string(snapshotMagic) {
		_ = it.Close()
		return fmt.Errorf("storage: the staged link snapshot is not a queen snapshot: %v", err)
	}
	_, _ = bw.Write(magic)
	var lenBuf [binary.MaxVarintLen64]byte
	put := func(k, v []byte) {
		_, _ = bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(k)))])
		_, _ = bw.Write(k)
		_, _ = bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(v)))])
		_, _ = bw.Write(v)
	}
	var clockMs int64
	format := wire.FormatV1
	for {
		k, err := readField(r, true)
		if err != nil {
			_ = it.Close()
			return err
		}
		if k == nil {
			break
		}
		v, err := readField(r, false)
		if err != nil {
			_ = it.Close()
			return err
		}
		switch {
		case string(k) == string(keyClock) && len(v) == 8:
			clockMs = int64(binary.BigEndian.Uint64(v))
		case string(k) == string(keyActiveFormat):
			if len(v) == 8 {
				format = max(format, uint32(binary.BigEndian.Uint64(v)))
			}
			continue
		case string(k) == string(keyApplied), string(k) == string(keyLink), string(k) == string(keyLinkStage),
			bytes.HasPrefix(k, linkChunkPrefix), ownRegistryKey(k):
			continue
		}
		put(k, v)
		if err := cr.err; err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("storage: read the staged link snapshot: %w", err)
	}
	// The old store is read no more: the new one may replace it once the
	// stream's end arrives.
	l := s.Link()
	l.Linked, l.Source, l.Applied = true, d.Source, d.SourceIndex
	l.ClockMs, l.Format = clockMs, format
	put(keyApplied, binary.BigEndian.AppendUint64(nil, index))
	put(keyActiveFormat, binary.BigEndian.AppendUint64(nil, uint64(s.format.Load())))
	put(keyLink, l.encode())
	for _, kv := range own {
		put(kv[0], kv[1])
	}
	_ = bw.WriteByte(0)
	return bw.Flush()
}

// ownRegistryKey says whether k is a node registry entry, which describes
// a cluster's own nodes: a standby keeps its own, never its source's
// (sourceOnly in link_apply.go leaves the source's registrations out of
// the entries for the same reason).
func ownRegistryKey(k []byte) bool {
	return bytes.HasPrefix(k, kafkaKey(kafkaNode)) || bytes.HasPrefix(k, kafkaKey(kafkaMember))
}

// ownRegistries reads this store's node registry entries (a few per node).
func (s *Store) ownRegistries() ([][2][]byte, error) {
	var out [][2][]byte
	for _, prefix := range [][]byte{kafkaKey(kafkaNode), kafkaKey(kafkaMember)} {
		it := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		for it.First(); it.Valid(); it.Next() {
			out = append(out, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
		}
		if err := it.Close(); err != nil {
			return nil, fmt.Errorf("storage: read the node registries: %w", err)
		}
	}
	return out, nil
}

// chunkReader reads the staged chunks' bytes in order.
type chunkReader struct {
	it    *pebble.Iterator
	valid bool
	buf   []byte
	err   error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if !c.valid {
			if err := c.it.Error(); err != nil {
				c.err = err
				return 0, err
			}
			return 0, io.EOF
		}
		c.buf = append(c.buf[:0], c.it.Value()...)
		c.valid = c.it.Next()
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}
