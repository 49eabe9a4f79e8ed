package worktree_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pibot/pibot/internal/worktree"
)

// A worktree made for a place and never claimed (pibot died between
// making it and writing the session entry) is the one the place's next
// Create gets, not a "-2": only while it is unused, only for the same
// key and start, and never once it is claimed.
func TestCreateAdoptsWhatACrashLeft(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	ctx := t.Context()
	name := worktree.Name("slack", "C1", "9.9")
	orphan, err := m.Create(ctx, name, "", "loc-a")
	if err != nil {
		t.Fatal(err)
	}
	// The crash: no Claim. The place's next run adopts it.
	again, err := m.Create(ctx, name, "", "loc-a")
	if err != nil || again != orphan {
		t.Fatalf("second Create = %+v, %v; want the orphan %+v", again, err, orphan)
	}
	// Another place (or no key) never takes it.
	other, err := m.Create(ctx, name, "", "loc-b")
	if err != nil || other.Branch != name+"-2" {
		t.Fatalf("another key's Create = %+v, %v; want %s-2", other, err, name)
	}
	if none, err := m.Create(ctx, name, "", ""); err != nil || none.Branch != name+"-3" {
		t.Fatalf("a keyless Create = %+v, %v; want %s-3", none, err, name)
	}
	// Pruned while orphaned: adopted, made again from its branch.
	if gone, err := m.Prune(ctx, time.Hour, time.Now().Add(2*time.Hour)); err != nil || len(gone) != 3 {
		t.Fatalf("prune: %v %v", gone, err)
	}
	if again, err := m.Create(ctx, name, "", "loc-a"); err != nil || again != orphan {
		t.Fatalf("Create after the prune = %+v, %v; want the orphan %+v", again, err, orphan)
	}
	if _, err := os.Stat(filepath.Join(orphan.Path, "main.txt")); err != nil {
		t.Fatalf("the adopted worktree was not checked out again: %v", err)
	}
	// Claimed: the next Create of the place is a new worktree (a fork).
	if err := m.Claim(orphan); err != nil {
		t.Fatal(err)
	}
	fork, err := m.Create(ctx, name, "", "loc-a")
	if err != nil || fork.Branch != name+"-4" {
		t.Fatalf("Create after Claim = %+v, %v; want %s-4", fork, err, name)
	}
}

// An orphan someone worked in, or made from another commit, is left as
// it is: a new worktree is made.
func TestCreateAdoptsOnlyUnused(t *testing.T) {
	dir := repo(t)
	m := manager(t, dir)
	ctx := t.Context()
	first := git(t, dir, "rev-parse", "HEAD")
	dirty, err := m.Create(ctx, "pibot/dirty", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dirty.Path, "wip.txt"), "wip\n")
	if got, err := m.Create(ctx, "pibot/dirty", "", "k"); err != nil || got.Branch != "pibot/dirty-2" {
		t.Fatalf("Create over a changed orphan = %+v, %v", got, err)
	}
	committed, err := m.Create(ctx, "pibot/committed", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	git(t, committed.Path, "commit", "-q", "--allow-empty", "-m", "work")
	if got, err := m.Create(ctx, "pibot/committed", "", "k"); err != nil || got.Branch != "pibot/committed-2" {
		t.Fatalf("Create over an orphan with a commit = %+v, %v", got, err)
	}
	older, err := m.Create(ctx, "pibot/older", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "main.txt"), "two\n")
	git(t, dir, "commit", "-q", "-am", "second")
	if got, err := m.Create(ctx, "pibot/older", "", "k"); err != nil || got.Branch != "pibot/older-2" || got.Base == first {
		t.Fatalf("Create at a new HEAD over an orphan of the old = %+v, %v", got, err)
	}
	if got, err := m.Create(ctx, "pibot/older", first, "k"); err != nil || got != older {
		t.Fatalf("Create at the orphan's commit = %+v, %v; want %+v", got, err, older)
	}
}
