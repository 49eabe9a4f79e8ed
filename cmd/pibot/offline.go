package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/pibot/pibot/config"
)

// unsetMark stands for an environment variable that is not set, in a
// configuration loaded by a command that talks to no platform.
const unsetMark = "\x00unset:"

// loadOfflineConfig loads the configuration for a command that only works
// on the data directory (`pibot pairing`): a ${VAR} that is not set (a
// platform token kept out of this shell) is no error, unless data_dir
// needs it.
func (c *cli) loadOfflineConfig(path string) (config.Config, error) {
	lenient := *c
	lenient.getenv = func(k string) string {
		if v := c.getenv(k); v != "" {
			return v
		}
		if k == "PIBOT_CONFIG" {
			return ""
		}
		return unsetMark + k
	}
	cfg, _, err := lenient.loadConfig(path)
	if err != nil {
		return config.Config{}, err
	}
	if i := strings.Index(cfg.DataDir, unsetMark); i >= 0 {
		name := strings.SplitN(cfg.DataDir[i+len(unsetMark):], "/", 2)[0]
		return config.Config{}, fmt.Errorf("data_dir: ${%s}: environment variable is not set", name)
	}
	return cfg, nil
}

// haveDataDir checks that the data directory exists: a command that reads
// pibot's state must not quietly start an empty one elsewhere (run from
// another directory, with a relative data_dir, or without the config).
func haveDataDir(cfg config.Config) error {
	st, err := os.Stat(cfg.DataDir)
	if errors.Is(err, fs.ErrNotExist) {
		from := "the default data_dir"
		if cfg.File != "" {
			from = "data_dir of " + cfg.File
		}
		hint := ""
		if cfg.File == "" {
			hint = " (the systemd service: sudo -u pibot pibot … -c /etc/pibot/config.yaml)"
		}
		return fmt.Errorf("no data directory at %s (%s); give the configuration `pibot serve` uses with -c FILE or $PIBOT_CONFIG%s, "+
			"or run from the directory a relative data_dir is relative to", cfg.DataDir, from, hint)
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("data_dir %s is not a directory", cfg.DataDir)
	}
	return nil
}

// foreignDataDir says so when the data directory belongs to another user
// than the one running the command (root, after a systemd install whose
// service runs as pibot), with the command to run instead; nil when the
// owner is this user or cannot be told. A pairing store written by
// another user would belong to that user, and the service could no longer
// read it. args are the command's words after "pibot".
func foreignDataDir(cfg config.Config, args []string) error {
	st, err := os.Stat(cfg.DataDir)
	if err != nil {
		return nil // haveDataDir says what is wrong
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Uid) == os.Getuid() {
		return nil
	}
	name := func(uid string) string {
		if u, err := user.LookupId(uid); err == nil {
			return u.Username
		}
		return "uid " + uid
	}
	owner, me := name(strconv.FormatUint(uint64(sys.Uid), 10)), name(strconv.Itoa(os.Getuid()))
	conf := "<the service's configuration>"
	if cfg.File != "" {
		if abs, err := filepath.Abs(cfg.File); err == nil {
			conf = abs
		}
	}
	return fmt.Errorf("the data directory %s belongs to %s, but this runs as %s: the pairing store would be written as %s "+
		"and the service could not read it; run it as the service's user with the service's configuration: sudo -u %s pibot %s -c %s",
		cfg.DataDir, owner, me, me, owner, strings.Join(args, " "), conf)
}
