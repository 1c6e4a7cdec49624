package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// build is one queen binary the guard measures and what it was built from.
type build struct {
	Bin   string `json:"-"`
	Label string `json:"label"`
	// Rev is the commit it was built from, "" for a given binary.
	Rev string `json:"rev,omitempty"`
	// Dirty lists the working tree's uncommitted changes (git status
	// --porcelain) when it was built from the working tree.
	Dirty []string `json:"dirty,omitempty"`
}

// moduleRoot is the directory of the go.mod of the current directory's
// module: the working tree the guard builds.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run from inside the queen module (no go.mod here)")
	}
	return filepath.Dir(gomod), nil
}

// buildQueen builds ./cmd/queen of the source tree at dir into out.
// -trimpath makes the two builds' unchanged packages the same build
// actions, whatever directory each tree is in, so the second build reuses
// the first's cache.
func buildQueen(ctx context.Context, dir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/queen")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/queen in %s: %w", dir, err)
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// buildBoth builds the base revision (in a detached worktree under tmp,
// removed before it returns) and the working tree as it is, uncommitted
// changes included.
func buildBoth(ctx context.Context, root, rev, tmp string) (a, b build, err error) {
	hash, err := git(ctx, root, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return a, b, err
	}
	short := hash[:min(len(hash), 9)]
	status, err := git(ctx, root, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return a, b, err
	}
	head, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return a, b, err
	}
	var dirty []string
	for _, l := range strings.Split(status, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			dirty = append(dirty, l)
		}
	}

	wt := filepath.Join(tmp, "base")
	progress("building base %s (%s) in a temporary worktree", rev, short)
	if _, err := git(ctx, root, "worktree", "add", "--detach", wt, hash); err != nil {
		return a, b, err
	}
	// A fresh context: the worktree goes even when ctx was cancelled.
	defer func() {
		if _, rerr := git(context.Background(), root, "worktree", "remove", "--force", wt); rerr != nil {
			os.RemoveAll(wt)
			_, _ = git(context.Background(), root, "worktree", "prune")
		}
	}()
	a = build{Bin: filepath.Join(tmp, "queen-base"), Label: fmt.Sprintf("%s (%s)", rev, short), Rev: hash}
	if err := buildQueen(ctx, wt, a.Bin); err != nil {
		return a, b, err
	}
	progress("building the working tree (%d uncommitted changes)", len(dirty))
	b = build{Bin: filepath.Join(tmp, "queen-work"), Label: "working tree", Rev: head, Dirty: dirty}
	if len(dirty) > 0 {
		b.Label = fmt.Sprintf("working tree (%s + %d uncommitted)", head[:min(len(head), 9)], len(dirty))
	} else {
		b.Label = fmt.Sprintf("working tree (%s, clean)", head[:min(len(head), 9)])
	}
	if err := buildQueen(ctx, root, b.Bin); err != nil {
		return a, b, err
	}
	return a, b, nil
}
