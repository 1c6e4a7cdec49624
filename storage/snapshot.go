package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble"
	sm "github.com/lni/dragonboat/v4/statemachine"
)

// A snapshot is the store's whole key space, streamed in key order:
// magic, then (uvarint key length, key, uvarint value length, value) pairs,
// then a zero key length. Dragonboat asks for one only to bring a lagging
// or new replica up to date; its periodic snapshots of an on-disk state
// machine are metadata only.
var snapshotMagic = []byte("QSNAP1\n")

const maxSnapshotField = 1 << 30

// PrepareSnapshot captures a point-in-time view while Update is paused.
func (s *Store) PrepareSnapshot() (interface{}, error) {
	return s.db.NewSnapshot(), nil
}

// SaveSnapshot streams the captured view to w.
func (s *Store) SaveSnapshot(ctx interface{}, w io.Writer, stopc <-chan struct{}) error {
	snap, ok := ctx.(*pebble.Snapshot)
	if !ok {
		return fmt.Errorf("storage: snapshot context is %T", ctx)
	}
	defer snap.Close()
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(snapshotMagic); err != nil {
		return err
	}
	it := snap.NewIter(nil)
	defer it.Close()
	var lenBuf [binary.MaxVarintLen64]byte
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%1024 == 0 {
			select {
			case <-stopc:
				return sm.ErrSnapshotStopped
			default:
			}
		}
		for _, field := range [][]byte{it.Key(), it.Value()} {
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
	if err := ingestSnapshot(db, bufio.NewReaderSize(r, 1<<20), stopc); err != nil {
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

	s.dbMu.Lock()
	s.mu.Lock()
	old, oldDir := s.db, s.dbDir
	for _, p := range s.parts {
		p.deleted.Store(true) // handles readers hold are stale now
	}
	if old != nil {
		_ = old.Close()
	}
	s.recovered.Add(1)
	err = s.openDB(dir)
	s.mu.Unlock()
	s.dbMu.Unlock()
	if err != nil {
		return err
	}
	if oldDir != "" && oldDir != dir {
		_ = os.RemoveAll(oldDir)
	}
	s.log.Info("storage: recovered from snapshot", "dir", dir, "applied", s.applied.Load())
	return nil
}

func ingestSnapshot(db *pebble.DB, r *bufio.Reader, stopc <-chan struct{}) error {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != string(snapshotMagic) {
		return fmt.Errorf("storage: not a queen snapshot: %v", err)
	}
	b := db.NewBatch()
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
