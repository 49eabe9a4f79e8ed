package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pibot/pibot/internal/groupsync"
	"github.com/pibot/pibot/session"
)

// index maps a location key to the session file that holds it. It is a
// cache: the session files are the truth (their heads name their
// locations), and a missing index file is rebuilt from them.
type index struct {
	mu   sync.Mutex
	path string
	f    *groupsync.File // new bindings share fsyncs
	locs map[string]string
}

type indexRecord struct {
	Loc  string `json:"loc"`
	Path string `json:"path"` // "" unbinds (/new)
}

func openIndex(path, sessionsDir string, log *slog.Logger) (*index, error) {
	ix := &index{path: path, locs: map[string]string{}}
	data, err := os.ReadFile(path)
	rebuilt := false
	switch {
	case err == nil:
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			var r indexRecord
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			if r.Path == "" {
				delete(ix.locs, r.Loc)
			} else {
				ix.locs[r.Loc] = r.Path
			}
		}
	case errors.Is(err, os.ErrNotExist):
		if err := ix.rebuild(sessionsDir, log); err != nil {
			return nil, err
		}
		rebuilt = true
	default:
		return nil, fmt.Errorf("gateway: index: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("gateway: index: %w", err)
	}
	ix.f = groupsync.New(f)
	if rebuilt {
		for loc, p := range ix.locs {
			if err := ix.write(indexRecord{Loc: loc, Path: p}); err != nil {
				return nil, err
			}
		}
		if err := ix.sync(); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// rebuild scans every session file for its heads.
func (ix *index) rebuild(dir string, log *slog.Logger) error {
	modified := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		s, err := session.OpenFile(p, session.Options{ReadOnly: true})
		if err != nil {
			log.Warn("index rebuild: skip session", "path", p, "err", err)
			return nil
		}
		defer s.Close()
		for loc, head := range s.Heads() {
			e, _ := s.Get(head)
			if _, ok := ix.locs[loc]; !ok || e.Timestamp > modified[loc] {
				ix.locs[loc] = p
				modified[loc] = e.Timestamp
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("gateway: index rebuild: %w", err)
	}
	return nil
}

// write appends r without waiting for the disk; sync makes it durable.
func (ix *index) write(r indexRecord) error {
	b, _ := json.Marshal(r)
	if err := ix.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("gateway: index: %w", &writeError{err})
	}
	return nil
}

// sync makes every binding set so far durable. The inbox lets a message go
// only after this, so a crash never loses the location of an applied
// message (replaying it finds its session again).
func (ix *index) sync() error {
	if err := ix.f.Sync(); err != nil {
		return fmt.Errorf("gateway: index sync: %w", &writeError{err})
	}
	return nil
}

func (ix *index) get(loc string) (string, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p, ok := ix.locs[loc]
	return p, ok
}

// keysWithPrefix lists the locations of a conversation (its main line and
// threads): keys equal to prefix or starting with prefix + ":".
func (ix *index) keysWithPrefix(prefix string) []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []string
	for k := range ix.locs {
		if k == prefix || strings.HasPrefix(k, prefix+":") {
			out = append(out, k)
		}
	}
	return out
}

// set binds loc to path ("" unbinds) durably.
func (ix *index) set(loc, path string) error {
	if err := ix.bind(loc, path); err != nil {
		return err
	}
	return ix.sync()
}

// bind binds loc to path without waiting for the disk: for a message's
// own location, made durable by sync before the inbox lets the message go.
func (ix *index) bind(loc, path string) error {
	ix.mu.Lock()
	if ix.locs[loc] == path {
		ix.mu.Unlock()
		return nil
	}
	if path == "" {
		delete(ix.locs, loc)
	} else {
		ix.locs[loc] = path
	}
	ix.mu.Unlock()
	return ix.write(indexRecord{Loc: loc, Path: path})
}

// close writes and syncs what is buffered, then closes the file.
func (ix *index) close() error { return ix.f.Close() }
