package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/pibot/pibot/config"
)

// configFlag adds -c FILE to fs and returns its value.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("c", "", "configuration `FILE` (default $PIBOT_CONFIG, else built-in defaults)")
}

// loadConfig reads path (or $PIBOT_CONFIG, or nothing: the defaults) and
// validates it. It returns the configuration and the file it came from
// ("" for the defaults). Errors name the file and every bad key.
func (c *cli) loadConfig(path string) (config.Config, string, error) {
	if path == "" {
		path = c.getenv("PIBOT_CONFIG")
	}
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path, c.getenv); err != nil {
			return config.Config{}, path, err
		}
		cfg.File = path
	}
	if err := cfg.Validate(); err != nil {
		return config.Config{}, path, configErrors(path, err)
	}
	if c.scrub != nil {
		c.scrub(cfg)
	}
	return cfg, path, nil
}

// configErrors names the configuration at path ("": the defaults) in
// front of its problems, one per line when err joins several.
func configErrors(path string, err error) error {
	name := path
	if name == "" {
		name = "default configuration"
	}
	return fmt.Errorf("%s:\n%w", name, err)
}

// runConfig runs `pibot config check|example`.
func runConfig(c *cli, args []string) error {
	if len(args) == 0 {
		return usageErr("config: want check or example")
	}
	switch args[0] {
	case "example":
		fs := c.newFlags("config example")
		pos, err := parseArgs(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs("config example", pos, 0, "no arguments"); err != nil {
			return err
		}
		_, err = fmt.Fprint(c.stdout, config.Example)
		return err
	case "check":
		fs := c.newFlags("config check")
		file := configFlag(fs)
		pos, err := parseArgs(fs, args[1:])
		if err != nil {
			return err
		}
		if len(pos) == 1 && *file == "" {
			*file = pos[0] // `pibot config check FILE` works too
		} else if err := wantArgs("config check", pos, 0, "no arguments besides -c FILE"); err != nil {
			return err
		}
		cfg, path, err := c.loadConfig(*file)
		if err != nil {
			c.printConfigErrors(err)
			return &exitError{code: 1}
		}
		// Everything serve would refuse at start, in serve's words.
		if err := startChecks(context.Background(), c, cfg); err != nil {
			c.printConfigErrors(configErrors(path, err))
			return &exitError{code: 1}
		}
		if path == "" {
			path = "default configuration"
		}
		errs, warns := modelProblems(cfg, c.getenv)
		warns = append(warns, cfg.Cluster.Warnings()...)
		for _, w := range warns {
			fmt.Fprintf(c.stderr, "pibot: %s: warning: %s\n", path, w)
		}
		if len(errs) > 0 {
			fmt.Fprintf(c.stderr, "pibot: %s:\n", path)
			for _, e := range errs {
				fmt.Fprintf(c.stderr, "  %s\n", e)
			}
			return &exitError{code: 1}
		}
		fmt.Fprintf(c.stdout, "%s: ok\n", path)
		return nil
	}
	return usageErr("config: unknown subcommand %q (want check or example)", args[0])
}

// printConfigErrors prints one line per configuration problem.
func (c *cli) printConfigErrors(err error) {
	var joined interface{ Unwrap() []error }
	inner := errors.Unwrap(err)
	if inner != nil && errors.As(inner, &joined) {
		fmt.Fprintf(c.stderr, "pibot: %s\n", firstLine(err.Error()))
		for _, e := range joined.Unwrap() {
			fmt.Fprintf(c.stderr, "  %s\n", e)
		}
		return
	}
	fmt.Fprintln(c.stderr, "pibot:", err)
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// dataPath returns name inside the configured data directory.
func dataPath(cfg config.Config, name ...string) string {
	return filepath.Join(append([]string{cfg.DataDir}, name...)...)
}
