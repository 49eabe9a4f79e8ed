package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pibot/pibot/adapters/discord"
	"github.com/pibot/pibot/config"
)

// newDiscord builds the Discord adapter from adapters.discord.*.
func newDiscord(cfg config.Config, log *slog.Logger) (*discord.Adapter, error) {
	dc, err := discordConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc.Logger = log
	return discord.New(dc)
}

// runDiscord runs `pibot discord invite`: it prints the OAuth2 URL that
// adds the bot to a server with the scopes and permissions pibot needs.
// The application id comes from --application-id, adapters.discord.application_id,
// or Discord itself (with the configured token).
func runDiscord(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 || args[0] != "invite" {
		return usageErr("discord: want invite")
	}
	fs := c.newFlags("discord invite")
	file := configFlag(fs)
	appID := fs.String("application-id", "", "the application `ID` (default: adapters.discord.application_id, else asked from Discord)")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("discord invite", pos, 0, "no arguments"); err != nil {
		return err
	}
	id := *appID
	if id == "" {
		cfg, _, err := c.loadConfig(*file)
		if err != nil {
			return err
		}
		id = cfg.Adapter.Discord.ApplicationID
		if id == "" {
			if !cfg.Adapter.Discord.Enabled() {
				return &config.Error{Key: "adapters.discord.application_id", Msg: "not set and no adapters.discord.token to ask Discord with; or pass --application-id"}
			}
			a, err := newDiscord(cfg, newLogger(c.stderr, cfg.Log))
			if err != nil {
				return err
			}
			if id, err = a.ApplicationID(ctx); err != nil {
				return fmt.Errorf("discord invite: %w", err)
			}
		}
	}
	fmt.Fprintln(c.stdout, discord.InviteURL(id))
	return nil
}
