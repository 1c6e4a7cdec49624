package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// ErrNoRevision is BuildRevision's error when the checkout does not hold
// the revision (a shallow clone, or a source tree without git).
var ErrNoRevision = errors.New("harness: the revision is not in this checkout")

// BuildRevision builds ./cmd/queen as it was at git revision rev (an
// earlier release, for the upgrade tests), from a temporary worktree of
// the module's repository, and keeps the binary for later runs under the
// system's temp dir, by revision.
func BuildRevision(rev string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	full, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil || len(full) < 40 {
		return "", fmt.Errorf("%w: %s", ErrNoRevision, rev)
	}
	commit := string(full[:40])
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("queen-e2e-rev-%d", os.Getuid()), commit)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	unlock, err := flockPath(filepath.Join(dir, "lock"), syscall.LOCK_EX)
	if err != nil {
		return "", err
	}
	defer unlock()
	bin := filepath.Join(dir, "queen")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tree, err := os.MkdirTemp(dir, "tree")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tree)
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", "--force", tree, commit).CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: git worktree add %s: %v\n%s", rev, err, out)
	}
	defer func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", tree).Run() }()
	tmp := bin + ".build"
	cmd := exec.Command("go", "build", "-o", tmp, "./cmd/queen")
	cmd.Dir = tree
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go build at %s: %v\n%s", rev, err, out)
	}
	// Renamed complete: a binary under its final name is whole.
	return bin, os.Rename(tmp, bin)
}

// SetBinary makes the node's next start run bin (an older or newer build
// of queen on the same data dir, as an upgrade does).
func (n *Node) SetBinary(bin string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.bin = bin
}
