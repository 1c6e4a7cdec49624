package raftgroupstest

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/queen-mq/queen/crypto/envelope"
	"github.com/queen-mq/queen/raftgroups"
)

// KeyHex is the QUEEN_ENCRYPTION_KEY StartKeyed installs.
const KeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

// StartKeyed is Start with the encryption key KeyHex installed, also
// answering the node's data dir (to look for clear text in its files).
func StartKeyed(t testing.TB) (*raftgroups.Host, *raftgroups.Engine, string) {
	t.Helper()
	var dir string
	h, e := StartWith(t, func(c *raftgroups.Config) { dir = c.Dir })
	k, err := envelope.ParseKey(KeyHex)
	if err != nil {
		t.Fatal(err)
	}
	e.SetPayloadKey(k)
	return h, e, dir
}

// FilesContaining lists the files under dir whose bytes contain needle.
func FilesContaining(t testing.TB, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			hits = append(hits, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
