package tools

import (
	"context"
	"io/fs"
	"path/filepath"
)

// walk visits every entry below root in lexical order, skipping .git
// directories and the workspace's denied paths, until fn returns false or
// ctx ends. It does not follow symlinks below root, so an entry's real
// path is root's real path joined with its relative path.
func (w *Workspace) walk(ctx context.Context, root string, fn func(path string, d fs.DirEntry) bool) error {
	stop := filepath.SkipAll
	realRoot := root
	if r, err := RealPath(root); err == nil {
		realRoot = r
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return errAborted
		}
		if err != nil {
			if p == root {
				return err
			}
			return nil
		}
		if p == root {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if len(w.deny) > 0 {
			rel, rerr := filepath.Rel(root, p)
			if rerr != nil || w.denied(p) || w.denied(filepath.Join(realRoot, rel)) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if !fn(p, d) {
			return stop
		}
		return nil
	})
	return err
}
