package main

import (
	"context"
	"fmt"
	"strings"
)

// command is one row of pibot's command table: the name it is dispatched
// by (and its aliases), the lines it adds to the usage, and what it runs.
// The usage printed by `pibot help` is generated from the table, and a test
// holds the package doc comment's list to it.
type command struct {
	name    string
	aliases []string
	usage   []usageLine
	run     func(ctx context.Context, c *cli, args []string) error
}

// usageLine is one line of the usage: a synopsis and what it does.
type usageLine struct {
	synopsis string // starts with "pibot "
	help     string
}

// commands returns pibot's command table, in the order of the usage.
func commands() []command {
	return []command{
		{name: "serve", usage: []usageLine{
			{"pibot serve [-c FILE] [--listen ADDR]", "run the gateway (web chat, Telegram, Slack, Discord)"}},
			run: func(ctx context.Context, c *cli, a []string) error { return serveCmd{c}.run(ctx, a) }},
		{name: "chat", usage: []usageLine{
			{"pibot chat [-c FILE] [-p] [--mode text|json] [--session FILE] [PROMPT...]", "one prompt (-p, --mode json) or a terminal chat"}},
			run: func(ctx context.Context, c *cli, a []string) error { return chatCmd{c}.run(ctx, a) }},
		{name: "session", usage: []usageLine{
			{"pibot session ls [DIR]", "list sessions (default <data_dir>/sessions)"},
			{"pibot session tree FILE", "show a session's tree"},
			{"pibot session context FILE [--leaf ID]", "print the context pi would build"},
			{"pibot session fork FILE --at ID [-o DIR]", "copy the branch ending at ID into a new session"},
			{"pibot session repair FILE [--dry-run]", "repair a damaged session file"},
			{"pibot session export FILE [--leaf ID] [-o OUT]", "export one branch as a linear session"}},
			run: func(_ context.Context, c *cli, a []string) error { return sessionCmd{c}.run(a) }},
		{name: "config", usage: []usageLine{
			{"pibot config check [-c FILE]", "validate a configuration file"},
			{"pibot config example", "print a documented configuration"}},
			run: func(_ context.Context, c *cli, a []string) error { return runConfig(c, a) }},
		{name: "models", usage: []usageLine{
			{"pibot models [-c FILE]", "list configured models"}},
			run: func(_ context.Context, c *cli, a []string) error { return runModels(c, a) }},
		{name: "agents", usage: []usageLine{
			{"pibot agents [-c FILE]", "list the agents and the bindings"},
			{"pibot agents which [-c FILE] LOCATION [--user ID] [--role ID] [--dm true|false]", "which agent a location gets, and why"}},
			run: func(_ context.Context, c *cli, a []string) error { return runAgents(c, a) }},
		{name: "pairing", usage: []usageLine{
			{"pibot pairing list [-c FILE]", "list pairing requests and paired users"},
			{"pibot pairing approve PLATFORM CODE", "approve a pairing code"},
			{"pibot pairing revoke PLATFORM USER", "revoke a paired user"}},
			run: func(ctx context.Context, c *cli, a []string) error { return pairingCmd{c}.run(ctx, a) }},
		{name: "extensions", usage: []usageLine{
			{"pibot extensions [-c FILE] [approve HASH]", "show the workspace files for the system prompt; approve them"}},
			run: func(_ context.Context, c *cli, a []string) error { return runExtensions(c, a) }},
		{name: "discord", usage: []usageLine{
			{"pibot discord invite [-c FILE] [--application-id ID]", "print the URL that adds the Discord bot to a server"}},
			run: runDiscord},
		{name: "doctor", usage: []usageLine{
			{"pibot doctor [-c FILE]", "check config, credentials, Redis, data dir and sandbox"}},
			run: runDoctor},
		{name: "cluster", usage: []usageLine{
			{"pibot cluster status [-c FILE]", "list the replicas, the sessions they hold and the leaders"}},
			run: runCluster},
		{name: "healthcheck", usage: []usageLine{
			{"pibot healthcheck [-c FILE] [--ready] [--url URL]", "probe a running pibot's /healthz (or /readyz)"}},
			run: runHealthcheck},
		{name: "slack", usage: []usageLine{
			{"pibot slack manifest [-c FILE] [--format yaml|json] [--url URL]", "print the Slack app manifest pibot needs"}},
			run: func(_ context.Context, c *cli, a []string) error { return runSlack(c, a) }},
		{name: "mcp", usage: []usageLine{
			{"pibot mcp list [-c FILE] [--wait D]", "start the MCP servers and show their state and tools"}},
			run: runMCP},
		{name: "version", aliases: []string{"--version", "-version"}, usage: []usageLine{
			{"pibot version [--short]", "print the version, commit, commit date and Go version"}},
			run: func(_ context.Context, c *cli, a []string) error { return runVersion(c, a) }},
		{name: "help", aliases: []string{"-h", "--help", "-help"}, usage: []usageLine{
			{"pibot help", "print this help"}},
			run: func(_ context.Context, c *cli, _ []string) error {
				fmt.Fprint(c.stdout, usage())
				return nil
			}},
	}
}

// findCommand returns the command named (or aliased) name.
func findCommand(name string) (command, bool) {
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd, true
		}
		for _, a := range cmd.aliases {
			if a == name {
				return cmd, true
			}
		}
	}
	return command{}, false
}

// helpColumn is where a usage line's help starts, two spaces at least
// after the synopsis; a longer synopsis puts its help on the next line, at
// the same column.
const helpColumn = 44

// usage is the text `pibot help` prints, generated from the command table.
func usage() string {
	var b strings.Builder
	b.WriteString("pibot — a pi-style coding agent behind chat\n\nUsage:\n")
	for _, cmd := range commands() {
		for _, l := range cmd.usage {
			line := "  " + l.synopsis
			if len(line)+2 <= helpColumn {
				line += strings.Repeat(" ", helpColumn-len(line))
			} else {
				line += "\n" + strings.Repeat(" ", helpColumn)
			}
			b.WriteString(line + l.help + "\n")
		}
	}
	b.WriteString("\n-c FILE defaults to $PIBOT_CONFIG; without a file pibot uses built-in defaults.\n")
	return b.String()
}
