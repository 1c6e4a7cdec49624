package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Build compiles ./cmd/queen of the module containing this package into dir
// and returns the binary's path.
func Build(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "queen")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/queen")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go build: %v\n%s", err, out)
	}
	return bin, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("harness: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("harness: not inside the queen module")
	}
	return filepath.Dir(mod), nil
}

// SharedBuild returns a queen binary built from the module's current
// source, shared by every process that asks for the same source: the test
// binaries of the end-to-end packages, which go test runs side by side,
// build ./cmd/queen once between them.
//
// Binaries live in a cache directory under os.TempDir(), one per key: a
// hash of the Go toolchain's settings and of every file of the module
// that can change the build (sourceKey). A lock file (flock) guards the
// cache: the first process to want a key builds it while the others wait,
// then they all reuse it. A binary is never stale: any change to the
// source is a new key, so a new build.
//
// release must be called when the caller no longer starts the binary
// (when its tests are done). Until then the process holds a shared lock
// on its key, and another process pruning the cache (every key that no
// running process holds) leaves it alone.
func SharedBuild() (bin string, release func(), err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", nil, err
	}
	key, err := sourceKey(root)
	if err != nil {
		return "", nil, err
	}
	cache := filepath.Join(os.TempDir(), fmt.Sprintf("queen-e2e-bin-%d", os.Getuid()))
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return "", nil, err
	}
	unlock, err := flockPath(filepath.Join(cache, "lock"), syscall.LOCK_EX)
	if err != nil {
		return "", nil, err
	}
	defer unlock()

	dir := filepath.Join(cache, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	// Taken while the cache lock is held, so no pruner is running: it
	// cannot wait.
	release, err = flockPath(filepath.Join(dir, "use.lock"), syscall.LOCK_SH)
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "queen")
	if _, err := os.Stat(bin); err != nil {
		// Built aside and renamed: a binary under its final name is
		// complete.
		tmp, err := os.MkdirTemp(dir, "build")
		if err == nil {
			var built string
			if built, err = Build(tmp); err == nil {
				err = os.Rename(built, bin)
			}
			os.RemoveAll(tmp)
		}
		if err != nil {
			release()
			return "", nil, err
		}
	}
	pruneBuilds(cache, key)
	return bin, release, nil
}

// pruneBuilds removes every cached binary but keep's that no process
// holds (a shared lock on its use.lock). Called with the cache locked.
func pruneBuilds(cache, keep string) {
	ents, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		dir := filepath.Join(cache, e.Name())
		unlock, err := flockPath(filepath.Join(dir, "use.lock"), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			continue // in use, or not ours to remove
		}
		os.RemoveAll(dir)
		unlock()
	}
}

// flockPath opens (creating) path and flocks it with how; the returned
// function unlocks and closes it.
func flockPath(path string, how int) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("harness: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// sourceKey hashes what a build of ./cmd/queen depends on: the toolchain
// and its settings (go env), and every file of the module at root, by
// path and content, except test files, version control, installed
// JavaScript packages, nested modules, and the data and output files
// .gitignore names (a node's ./queen-data, benchmark results, logs,
// profiles, built binaries). Whatever else changes (docs included) makes
// a new key: when in doubt, build again. Dependencies outside the module
// are pinned by go.mod and go.sum, which are hashed.
func sourceKey(root string) (string, error) {
	h := sha256.New()
	env, err := exec.Command("go", "env", "-json", "GOVERSION", "GOROOT", "GOOS", "GOARCH", "GOAMD64", "GOARM64",
		"GOFLAGS", "GOEXPERIMENT", "CGO_ENABLED", "CC", "CGO_CFLAGS", "CGO_LDFLAGS", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("harness: go env: %w", err)
	}
	h.Write(env)
	var settings struct{ GOWORK string }
	if err := json.Unmarshal(env, &settings); err != nil {
		return "", fmt.Errorf("harness: go env: %w", err)
	}
	if w := settings.GOWORK; w != "" && w != "off" {
		// A workspace builds other modules' working trees too, which are
		// not hashed: never reuse such a build.
		fmt.Fprintf(h, "workspace %s, process %d, %d\n", w, os.Getpid(), time.Now().UnixNano())
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walking
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if name == ".git" || name == "node_modules" || rel == "queen-data" || rel == "bench/results" {
				return filepath.SkipDir
			}
			if _, err := os.Lstat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.go") || rel == "queen" {
			return nil
		}
		switch filepath.Ext(name) {
		case ".log", ".test", ".out", ".prof":
			return nil
		}
		fmt.Fprintf(h, "%q %v\n", rel, d.Type())
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %q\n", target)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		fh := sha256.New()
		if _, err := io.Copy(fh, f); err != nil {
			return err
		}
		fmt.Fprintf(h, "%x\n", fh.Sum(nil))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("harness: hash the module's source: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}
