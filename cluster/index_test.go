package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pibot/pibot/cluster"
)

// An index file written before the index moved into package cluster (the
// same format: one {"loc","path"} record a line, the last of a key wins,
// an empty path unbinds, a torn last line from a crash) opens unchanged,
// and its seed is not asked for.
func TestIndexReadsExistingFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.jsonl")
	old := `{"loc":"telegram:1","path":"/d/sessions/telegram/a.jsonl"}
{"loc":"telegram:2","path":"/d/sessions/telegram/b.jsonl"}
{"loc":"telegram:1","path":"/d/sessions/telegram/c.jsonl"}
{"loc":"telegram:2","path":""}
{"loc":"telegram:3","pa`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	ix, err := cluster.OpenIndex(path, cluster.IndexOptions{Seed: func() (map[string]string, error) {
		t.Error("an existing index was seeded")
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ctx := context.Background()
	if p, ok, _ := ix.Get(ctx, "telegram:1"); !ok || p != "/d/sessions/telegram/c.jsonl" {
		t.Fatalf("telegram:1 = %q, %v", p, ok)
	}
	for _, loc := range []string{"telegram:2", "telegram:3"} {
		if p, ok, _ := ix.Get(ctx, loc); ok {
			t.Fatalf("%s = %q, want unbound", loc, p)
		}
	}
}

// A missing index file is seeded, durably: a crash right after the open
// (no Close) keeps the seeded bindings.
func TestIndexSeedsAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.jsonl")
	seed := map[string]string{"telegram:1": "/s/a.jsonl", "web:x": "/s/b.jsonl"}
	ix, err := cluster.OpenIndex(path, cluster.IndexOptions{Seed: func() (map[string]string, error) { return seed, nil }})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path) // what a kill -9 now leaves
	if err != nil {
		t.Fatal(err)
	}
	_ = ix.Close()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ix, err = cluster.OpenIndex(path, cluster.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for loc, want := range seed {
		if p, ok, _ := ix.Get(context.Background(), loc); !ok || p != want {
			t.Fatalf("%s = %q, %v; want %q", loc, p, ok, want)
		}
	}
}

// A failing seed fails the open and creates no file, so the next start
// tries again.
func TestIndexSeedFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.jsonl")
	boom := errors.New("boom")
	if _, err := cluster.OpenIndex(path, cluster.IndexOptions{Seed: func() (map[string]string, error) { return nil, boom }}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("index file after a failed seed: %v", err)
	}
}
