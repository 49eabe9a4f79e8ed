package tools

import (
	"context"
	"io/fs"
	"path/filepath"
)

// walk visits every entry below root in lexical order, skipping .git
// directories, until fn returns false or ctx ends.
func walk(ctx context.Context, root string, fn func(path string, d fs.DirEntry) bool) error {
	stop := filepath.SkipAll
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
		if !fn(p, d) {
			return stop
		}
		return nil
	})
	return err
}
