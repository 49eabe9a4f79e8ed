package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/pibot/pibot/internal/groupsync"
)

// ErrWrite marks a failed write to a store (a full disk, an I/O error):
// the store recovers when a later write or Sync succeeds.
var ErrWrite = errors.New("cluster: write failed")

// LocalIndex maps a location key to the session file that holds it, in a local
// JSONL file (one {"loc","path"} record a line; the last record of a key
// wins, an empty path unbinds). It is a cache: the session files are the
// truth, and a missing file is seeded from them (IndexOptions.Seed).
// Bindings share fsyncs (group commit): Bind returns at once and Sync
// makes every binding so far durable.
type LocalIndex struct {
	mu   sync.Mutex
	f    *groupsync.File
	locs map[string]string
}

type indexRecord struct {
	Loc  string `json:"loc"`
	Path string `json:"path"` // "" unbinds
}

// IndexOptions configures OpenIndex.
type IndexOptions struct {
	// Seed returns the bindings of a missing index file (rebuilt from the
	// session files); they are durable before OpenIndex returns. nil: a
	// missing file starts empty.
	Seed func() (map[string]string, error)
}

// OpenIndex opens (or creates) the index file at path.
func OpenIndex(path string, opts IndexOptions) (*LocalIndex, error) {
	ix := &LocalIndex{locs: map[string]string{}}
	data, err := os.ReadFile(path)
	var seed map[string]string
	switch {
	case err == nil:
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			var r indexRecord
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue // a torn last line
			}
			if r.Path == "" {
				delete(ix.locs, r.Loc)
			} else {
				ix.locs[r.Loc] = r.Path
			}
		}
	case errors.Is(err, os.ErrNotExist):
		if opts.Seed != nil {
			if seed, err = opts.Seed(); err != nil {
				return nil, fmt.Errorf("cluster: index seed: %w", err)
			}
		}
	default:
		return nil, fmt.Errorf("cluster: index: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: index: %w", err)
	}
	ix.f = groupsync.New(f)
	if len(seed) > 0 {
		for loc, p := range seed {
			if err := ix.Bind(context.Background(), loc, p); err != nil {
				_ = ix.f.Close()
				return nil, err
			}
		}
		if err := ix.Sync(context.Background()); err != nil {
			_ = ix.f.Close()
			return nil, err
		}
	}
	return ix, nil
}

// Get returns the session file bound to loc.
func (ix *LocalIndex) Get(_ context.Context, loc string) (string, bool, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p, ok := ix.locs[loc]
	return p, ok, nil
}

// KeysWithPrefix lists the bound locations of a conversation (its main
// line and threads): keys equal to prefix or starting with prefix + ":".
func (ix *LocalIndex) KeysWithPrefix(_ context.Context, prefix string) ([]string, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []string
	for k := range ix.locs {
		if k == prefix || strings.HasPrefix(k, prefix+":") {
			out = append(out, k)
		}
	}
	return out, nil
}

// Bind binds loc to path ("" unbinds) without waiting for the disk: Get
// sees it at once, Sync makes it durable.
func (ix *LocalIndex) Bind(_ context.Context, loc, path string) error {
	ix.mu.Lock()
	if cur, ok := ix.locs[loc]; ok == (path != "") && cur == path {
		ix.mu.Unlock()
		return nil
	}
	if path == "" {
		delete(ix.locs, loc)
	} else {
		ix.locs[loc] = path
	}
	ix.mu.Unlock()
	b, _ := json.Marshal(indexRecord{Loc: loc, Path: path})
	if err := ix.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("cluster: index: %w: %w", ErrWrite, err)
	}
	return nil
}

// Set binds loc to path ("" unbinds) durably.
func (ix *LocalIndex) Set(ctx context.Context, loc, path string) error {
	if err := ix.Bind(ctx, loc, path); err != nil {
		return err
	}
	return ix.Sync(ctx)
}

// Sync makes every binding so far durable.
func (ix *LocalIndex) Sync(context.Context) error {
	if err := ix.f.Sync(); err != nil {
		return fmt.Errorf("cluster: index sync: %w: %w", ErrWrite, err)
	}
	return nil
}

// Close writes and syncs what is buffered, then closes the file.
func (ix *LocalIndex) Close() error {
	if err := ix.f.Close(); err != nil {
		return fmt.Errorf("cluster: index close: %w", err)
	}
	return nil
}
