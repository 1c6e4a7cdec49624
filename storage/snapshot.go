package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"
)

// A snapshot is the store's whole key space, streamed in key order:
// magic, then (uvarint key length, key, uvarint value length, value) pairs,
// then a zero key length. A chunk's location is local to a replica, so its
// blob key travels as tagBlobRecords + sequence with the records
// themselves, and the receiver writes them to segments of its own.
// Dragonboat asks for one only to bring a lagging or new replica up to
// date; its periodic snapshots of an on-disk state machine are metadata
// only.
var snapshotMagic = []byte("QSNAP2\n")

// tagBlobRecords marks a chunk's records in a snapshot stream; it is never
// a key in the store.
const tagBlobRecords = 'B'

// snapshotView is what PrepareSnapshot captures: the keys and the
// segments their locations point into, pinned until the stream is saved.
type snapshotView struct {
	snap *pebble.Snapshot
	segs *segments
}

const maxSnapshotField = 1 << 30

// PrepareSnapshot captures a point-in-time view while Update is paused.
func (s *Store) PrepareSnapshot() (interface{}, error) {
	s.segs.pin()
	return &snapshotView{snap: s.db.NewSnapshot(), segs: s.segs}, nil
}

// SaveSnapshot streams the captured view to w.
func (s *Store) SaveSnapshot(ctx interface{}, w io.Writer, stopc <-chan struct{}) error {
	view, ok := ctx.(*snapshotView)
	if !ok {
		return fmt.Errorf("storage: snapshot context is %T", ctx)
	}
	defer view.segs.unpin()
	snap := view.snap
	defer snap.Close()
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(snapshotMagic); err != nil {
		return err
	}
	it := snap.NewIter(nil)
	defer it.Close()
	var (
		lenBuf  [binary.MaxVarintLen64]byte
		records []byte
	)
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%1024 == 0 {
			select {
			case <-stopc:
				return sm.ErrSnapshotStopped
			default:
			}
		}
		key, value := it.Key(), it.Value()
		if key[0] == tagBlob {
			loc, err := decodeLocation(value)
			if err != nil {
				return err
			}
			ref := loc.encodeChunkRef()
			if records, err = view.segs.read(loc, records); err != nil {
				return fmt.Errorf("storage: snapshot: %w", err)
			}
			key, value = append([]byte{tagBlobRecords}, key[1:]...), append(ref, records...)
		}
		for _, field := range [][]byte{key, value} {
			if _, err := bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(field)))]); err != nil {
				return err
			}
			if _, err := bw.Write(field); err != nil {
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("storage: snapshot iteration: %w", err)
	}
	if _, err := bw.Write([]byte{0}); err != nil {
		return err
	}
	return bw.Flush()
}

// RecoverFromSnapshot builds a fresh database from a snapshot stream in a new
// directory, makes it durable, then switches CURRENT to it and drops the old
// one, so a crash at any point leaves one complete store.
func (s *Store) RecoverFromSnapshot(r io.Reader, stopc <-chan struct{}) error {
	cur, err := readCurrent(s.cfg.Dir)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("sm-%d", generation(cur)+1)
	dir := filepath.Join(s.cfg.Dir, name)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("storage: clear %s: %w", dir, err)
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{s.log}})
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", dir, err)
	}
	if err := ingestSnapshot(db, filepath.Join(dir, segmentsDir), s.cfg.SegmentBytes, s.log, bufio.NewReaderSize(r, 1<<20), stopc); err != nil {
		db.Close()
		os.RemoveAll(dir)
		return err
	}
	if err := db.Flush(); err == nil {
		err = db.Close()
	} else {
		db.Close()
		return fmt.Errorf("storage: flush recovered store: %w", err)
	}
	if err := writeCurrent(s.cfg.Dir, name); err != nil {
		return err
	}

	release := s.linkGate.exclude() // no link copy reads the old database
	s.dbMu.Lock()
	s.mu.Lock()
	old, oldDir, oldSegs := s.db, s.dbDir, s.segs
	for _, p := range s.parts {
		p.deleted.Store(true) // handles readers hold are stale now
	}
	if old != nil {
		_ = old.Close()
	}
	if oldSegs != nil {
		oldSegs.close()
	}
	s.recovered.Add(1)
	err = s.openDB(dir)
	s.mu.Unlock()
	s.dbMu.Unlock()
	release()
	if err != nil {
		return err
	}
	if oldDir != "" && oldDir != dir {
		_ = os.RemoveAll(oldDir)
	}
	s.syncedIndex.Store(s.applied.Load())
	s.syncedBytes.Store(s.appliedBytes.Load())
	s.log.Info("storage: recovered from snapshot", "dir", dir, "applied", s.applied.Load())
	return nil
}

func ingestSnapshot(db *pebble.DB, segDir string, segBytes int64, log *slog.Logger, r *bufio.Reader, stopc <-chan struct{}) (err error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != string(snapshotMagic) {
		return fmt.Errorf("storage: not a queen snapshot: %v", err)
	}
	// The first chunk names the first segment: every later sequence is
	// above it, as segments require.
	var segs *segments
	defer func() {
		if segs != nil {
			serr := segs.flush()
			if serr == nil {
				serr = segs.sync()
			}
			if err == nil {
				err = serr
			}
			segs.close()
		}
	}()
	b := db.NewBatch()
	// The receiver lays out and checksums its segments itself: its store
	// has this build's format whatever the sender's says.
	_ = b.Set(keyFormat, formatValue(), nil)
	for n := 0; ; n++ {
		if n%1024 == 0 {
			select {
			case <-stopc:
				b.Close()
				return sm.ErrSnapshotStopped
			default:
			}
		}
		k, err := readField(r, true)
		if err != nil {
			b.Close()
			return err
		}
		if k == nil {
			break
		}
		v, err := readField(r, false)
		if err != nil {
			b.Close()
			return err
		}
		if k[0] == tagFormat {
			continue
		}
		if k[0] == tagBlobRecords {
			if len(k) != 9 {
				b.Close()
				return errors.New("storage: snapshot chunk key malformed")
			}
			seq := binary.BigEndian.Uint64(k[1:])
			if segs == nil {
				if segs, err = openSegments(segDir, seq, segBytes, log); err != nil {
					b.Close()
					return err
				}
			}
			pid, base, records, err := decodeChunkRef(v)
			if err != nil {
				b.Close()
				return err
			}
			loc, err := segs.append(seq, records)
			if err != nil {
				b.Close()
				return err
			}
			loc.pid, loc.base = pid, base
			k, v = blobKey(seq), loc.encode()
		}
		_ = b.Set(k, v, nil)
		if b.Len() >= 8<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("storage: ingest snapshot: %w", err)
			}
			b = db.NewBatch()
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("storage: ingest snapshot: %w", err)
	}
	return nil
}

// readField reads one length-prefixed field; a zero length ends the stream
// when it stands where a key would (keys are never empty).
func readField(r *bufio.Reader, key bool) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("storage: snapshot truncated: %w", err)
	}
	if n == 0 {
		if key {
			return nil, nil
		}
		return []byte{}, nil
	}
	if n > maxSnapshotField {
		return nil, errors.New("storage: snapshot field too large")
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("storage: snapshot truncated: %w", err)
	}
	return buf, nil
}

func generation(name string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "sm-"))
	return n
}
