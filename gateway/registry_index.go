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
// (cluster.LocalIndex). A missing file is rebuilt from the session files
// in sessionsDir, read through files.
func openLocalIndex(path, sessionsDir string, files session.Storage, log *slog.Logger) (*cluster.LocalIndex, error) {
	ix, err := cluster.OpenIndex(path, cluster.IndexOptions{
		Seed: func() (map[string]string, error) { return rebuildIndex(sessionsDir, files, log) },
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return ix, nil
}

// rebuildIndex scans every session file for its heads: a location is
// bound to the file whose head for it was written last. A file is opened
// lazily (session.Options.Lazy): its lines are streamed once for their
// envelopes and no message is decoded (a damaged file is loaded whole, as
// any read-only open loads it). files reads them.
func rebuildIndex(dir string, files session.Storage, log *slog.Logger) (map[string]string, error) {
	locs := map[string]string{}
	modified := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		s, err := session.Open(files, p, session.Options{ReadOnly: true, Lazy: true})
		if err != nil {
			log.Warn("index rebuild: skip session", "path", p, "err", err)
			return nil
		}
		defer s.Close()
		for loc, head := range s.Tree().Heads() {
			ts := timestampOf(s.Tree(), head)
			if _, ok := locs[loc]; !ok || ts > modified[loc] {
				locs[loc] = p
				modified[loc] = ts
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gateway: index rebuild: %w", err)
	}
	return locs, nil
}

// timestampOf is the timestamp of the entry id of t, read from its
// envelope (a message is not read).
func timestampOf(t *session.Tree, id string) string {
	for e := range t.BranchBack(id) {
		return e.Timestamp
	}
	return ""
}

// RebuildIndex returns the bindings the session files of dataDir hold
// (what a missing index is rebuilt from): the seed of a shared index.
func RebuildIndex(dataDir string, log *slog.Logger) (map[string]string, error) {
	return rebuildIndex(sessionsDir(dataDir), session.FileStorage{}, log)
}
