package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pibot/pibot/session"
)

// listSessions returns every session under dir, recursively, most
// recently modified first.
func listSessions(dir string) ([]session.Info, error) {
	var all []session.Info
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		infos, err := session.List(p)
		if err != nil {
			return err
		}
		all = append(all, infos...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Modified.After(all[j].Modified) })
	return all, nil
}

// sessionPath resolves what a `session` subcommand was given: a file path
// (as `session ls` prints it, relative to the sessions directory, or to
// the working directory), a session id, or an unambiguous prefix of one,
// looked up in the sessions directory of the configuration configFile.
func (c *cli) sessionPath(arg, configFile string) (string, error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		return arg, nil
	}
	cfg, _, err := c.loadConfig(configFile)
	if err != nil {
		return "", err
	}
	dir := dataPath(cfg, "sessions")
	if p := filepath.Join(dir, arg); strings.HasSuffix(arg, ".jsonl") {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		return "", fmt.Errorf("session %s: no such file (nor under %s)", arg, dir)
	}
	all, err := listSessions(dir)
	if err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("session %s: %w", arg, err)
	}
	var found []session.Info
	for _, in := range all {
		if in.ID == arg {
			return in.Path, nil
		}
		if arg != "" && strings.HasPrefix(in.ID, arg) {
			found = append(found, in)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("session %s: no such file, and no session id starts with it under %s (see `pibot session ls`)", arg, dir)
	case 1:
		return found[0].Path, nil
	}
	var ids []string
	for _, in := range found {
		ids = append(ids, in.ID)
	}
	return "", fmt.Errorf("session %s: the prefix matches %d sessions (%s); give more of the id", arg, len(found), strings.Join(ids, ", "))
}
