package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
)

// maxSubcommands is Discord's limit of options per command.
const maxSubcommands = 25

// RegisterCommands publishes one application command (Config.Command,
// default /pi) with a subcommand per gateway command, each taking an
// optional free-text "args" option, by bulk overwrite: in every configured
// guild (instant), or globally when no guild is configured.
func (a *Adapter) RegisterCommands(ctx context.Context, cmds []chat.CommandSpec) error {
	var subs []*discordgo.ApplicationCommandOption
	for _, c := range cmds {
		name := strings.ToLower(c.Name)
		if !isCommand(name) {
			a.log.Warn("discord: command name not usable as a subcommand; skipped", "name", c.Name)
			continue
		}
		if len(subs) == maxSubcommands {
			a.log.Warn("discord: more than 25 commands; the rest work as text commands only", "skipped", name)
			continue
		}
		subs = append(subs, &discordgo.ApplicationCommandOption{
			Type: discordgo.ApplicationCommandOptionSubCommand, Name: name, Description: describe(c.Description, name),
			Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "args",
				Description: "Arguments, as after the text command", Required: false}},
		})
	}
	if len(subs) == 0 {
		return errors.New("discord: register commands: no command to register")
	}
	app, err := a.app.get(ctx)
	if err != nil {
		return err
	}
	list := []*discordgo.ApplicationCommand{{Name: a.cfg.Command, Description: "Talk to pibot: its commands", Options: subs}}
	scopes := a.cfg.Guilds
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	var errs []error
	for _, g := range scopes {
		route := "applications/" + app
		err := a.calls.do(ctx, modeSend, route, "register commands", func(opts ...discordgo.RequestOption) error {
			_, err := a.calls.s.ApplicationCommandBulkOverwrite(app, g, list, opts...)
			return err
		})
		if err != nil {
			if errors.Is(err, ErrTokenRefused) {
				return err
			}
			where := "globally"
			if g != "" {
				where = "in guild " + g
			}
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	return errors.Join(errs...)
}

// describe returns a description Discord accepts: 1-100 characters.
func describe(d, name string) string {
	d = strings.TrimSpace(d)
	if d == "" {
		d = "/" + name
	}
	if r := []rune(d); len(r) > 100 {
		d = string(r[:99]) + "…"
	}
	return d
}
