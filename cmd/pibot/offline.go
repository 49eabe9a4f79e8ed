package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

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
		return fmt.Errorf("no data directory at %s (%s); give the configuration `pibot serve` uses with -c FILE or $PIBOT_CONFIG, "+
			"or run from the directory a relative data_dir is relative to", cfg.DataDir, from)
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("data_dir %s is not a directory", cfg.DataDir)
	}
	return nil
}
