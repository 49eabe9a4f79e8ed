package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/session"
)

// openLocalIndex opens the location index file of the data directory
// (cluster.LocalIndex). A missing file is rebuilt from the session files.
func openLocalIndex(path, sessionsDir string, log *slog.Logger) (*cluster.LocalIndex, error) {
	ix, err := cluster.OpenIndex(path, cluster.IndexOptions{
		Seed: func() (map[string]string, error) { return rebuildIndex(sessionsDir, log) },
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return ix, nil
}

// rebuildIndex scans every session file for its heads: a location is
// bound to the file whose head for it was written last.
func rebuildIndex(dir string, log *slog.Logger) (map[string]string, error) {
	locs := map[string]string{}
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
		for loc, head := range s.Tree().Heads() {
			e, _ := s.Tree().Get(head)
			if _, ok := locs[loc]; !ok || e.Timestamp > modified[loc] {
				locs[loc] = p
				modified[loc] = e.Timestamp
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gateway: index rebuild: %w", err)
	}
	return locs, nil
}

// RebuildIndex returns the bindings the session files of dataDir hold
// (what a missing index is rebuilt from): the seed of a shared index.
func RebuildIndex(dataDir string, log *slog.Logger) (map[string]string, error) {
	return rebuildIndex(sessionsDir(dataDir), log)
}
