package main

import (
	"fmt"
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway/binding"
)

// runAgents runs `pibot agents [-c FILE]` (the agents and the bindings)
// and `pibot agents which -c FILE LOCATION [--user ID] [--role ID]
// [--dm true|false]` (the agent a place gets, and why).
func runAgents(c *cli, args []string) error {
	if len(args) > 0 && args[0] == "which" {
		return runAgentsWhich(c, args[1:])
	}
	fs := c.newFlags("agents")
	file := configFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("agents", pos, 0, "no arguments (or: which LOCATION)"); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(*file)
	if err != nil {
		c.printConfigErrors(err)
		return &exitError{code: 1}
	}
	fmt.Fprintln(c.stdout, "Agents:")
	for _, name := range cfg.AgentNames() {
		a, _ := cfg.AgentConfig(name)
		model := a.Model
		if model == "" {
			model = "(the first configured model)"
		}
		wt := ""
		if a.Worktree == config.WorktreePerThread {
			wt = ", a git worktree per thread"
		}
		fmt.Fprintf(c.stdout, "  %-12s model %s, workspace %s%s (%s)\n", name, model, a.Workspace, wt, config.AgentKey(name))
	}
	fmt.Fprintln(c.stdout, "Bindings (most specific wins; ties: the earlier; no match: default):")
	if len(cfg.Bindings) == 0 {
		fmt.Fprintln(c.stdout, "  none: every conversation gets the default agent")
	}
	shadowed := map[int]int{}
	for _, s := range binding.Shadowed(bindingRules(cfg)) {
		shadowed[s.Rule] = s.By
	}
	for i, r := range bindingRules(cfg) {
		note := ""
		if by, ok := shadowed[i]; ok {
			note = fmt.Sprintf("  (never matches: bindings[%d] always wins)", by)
		}
		fmt.Fprintf(c.stdout, "  bindings[%d] → %s: %s%s\n", i, r.Agent, r.Keys(), note)
	}
	return nil
}

// runAgentsWhich prints the agent a location gets: its name first, then
// why. LOCATION is platform:workspace:channel[:thread], as /schedule list
// prints it; whether it is a DM is guessed from the ids (a Slack D…
// channel, a positive Telegram chat id, a Discord channel without a
// guild, the web chat) unless --dm says.
func runAgentsWhich(c *cli, args []string) error {
	fs := c.newFlags("agents which")
	file := configFlag(fs)
	user := fs.String("user", "", "the sender's user `ID`")
	role := fs.String("role", "", "a Discord role `ID` the sender has")
	dm := fs.String("dm", "", "true or false: whether LOCATION is a one-to-one chat (default: guessed from the ids)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("agents which", pos, 1, "LOCATION (platform:workspace:channel[:thread])"); err != nil {
		return err
	}
	conv, err := parseLocation(pos[0])
	if err != nil {
		return usageErr("agents which: %v", err)
	}
	switch *dm {
	case "":
	case "true", "false":
		conv.DM = *dm == "true"
	default:
		return usageErr("agents which: --dm %q: want true or false", *dm)
	}
	cfg, _, err := c.loadConfig(*file)
	if err != nil {
		c.printConfigErrors(err)
		return &exitError{code: 1}
	}
	in := chat.Inbound{Conv: conv, User: chat.User{ID: *user}}
	if *role != "" {
		in.User.Roles = []string{*role}
	}
	choice := binding.Resolve(bindingRules(cfg), placeOf(in))
	a, _ := cfg.AgentConfig(choice.Agent)
	fmt.Fprintf(c.stdout, "%s %s\n  workspace %s, model %s\n", choice.Agent, choice.Why, a.Workspace, a.Model)
	return nil
}

// parseLocation reads platform:workspace:channel[:thread].
func parseLocation(s string) (chat.ConvRef, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] == "" || parts[2] == "" {
		return chat.ConvRef{}, fmt.Errorf("%q is not platform:workspace:channel[:thread] (like slack:T123:C456 or telegram::123456789)", s)
	}
	conv := chat.ConvRef{Platform: chat.Platform(parts[0]), Workspace: parts[1], Channel: parts[2]}
	if len(parts) == 4 {
		conv.Thread = parts[3]
	}
	switch conv.Platform {
	case "slack":
		conv.DM = strings.HasPrefix(conv.Channel, "D")
	case "telegram":
		conv.DM = !strings.HasPrefix(conv.Channel, "-")
	case "discord":
		conv.DM = conv.Workspace == ""
	case "web", "term":
		conv.DM = true
	}
	return conv, nil
}
