package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"go.yaml.in/yaml/v3"

	"github.com/pibot/pibot/adapters/slack"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// runSlack runs `pibot slack manifest`.
func runSlack(c *cli, args []string) error {
	if len(args) == 0 || args[0] != "manifest" {
		return usageErr("slack: want manifest")
	}
	fs := c.newFlags("slack manifest")
	file := configFlag(fs)
	format := fs.String("format", "yaml", "output `FORMAT`: yaml or json")
	publicURL := fs.String("url", "", "pibot's public https base `URL` (http mode: Slack posts to URL/slack/events)")
	name := fs.String("name", "pibot", "the app's display `NAME`")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("slack manifest", pos, 0, "no arguments"); err != nil {
		return err
	}
	if *format != "yaml" && *format != "json" {
		return usageErr("slack manifest: --format %q must be yaml or json", *format)
	}
	cfg, _, err := c.loadConfig(*file)
	if err != nil {
		c.printConfigErrors(err)
		return &exitError{code: 1}
	}
	s := cfg.Adapter.Slack
	m, err := slack.ManifestFor(slack.ManifestOptions{Name: *name, Command: s.Command, Mode: s.Mode, PublicURL: *publicURL})
	if err != nil {
		return err
	}
	var out []byte
	if *format == "json" {
		out, err = json.MarshalIndent(m, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(m)
	}
	if err != nil {
		return fmt.Errorf("slack manifest: %w", err)
	}
	_, err = c.stdout.Write(out)
	return err
}

// slackAdapter builds the Slack adapter from adapters.slack and, in http
// mode, mounts its handler at POST /slack/events.
func slackAdapter(cfg config.Config, log *slog.Logger, mux *http.ServeMux, rates tokenbucket.Rates) (*slack.Adapter, error) {
	sc, err := slackConfig(cfg)
	if err != nil {
		return nil, err
	}
	// In this process, or shared by the replicas (cluster mode).
	sc.Logger, sc.Rates = log, rates
	a, err := slack.New(sc)
	if err != nil {
		return nil, err
	}
	if a.Mode() == slack.ModeHTTP {
		mux.Handle("POST "+slack.EventsPath, a.EventsHandler())
	}
	return a, nil
}
