package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway/binding"
)

// bindingRules are cfg's bindings as the router's rules.
func bindingRules(cfg config.Config) []binding.Rule {
	out := make([]binding.Rule, len(cfg.Bindings))
	for i, b := range cfg.Bindings {
		out[i] = binding.Rule{Agent: b.Agent, Platform: strings.ToLower(b.Platform), Workspace: b.Workspace, Channel: b.Channel,
			DM: b.DM, User: b.User, Role: b.Role}
	}
	return out
}

// placeOf is where in was sent, as the bindings see it.
func placeOf(in chat.Inbound) binding.Place {
	return binding.Place{Platform: string(in.Conv.Platform), Workspace: in.Conv.Workspace, Channel: in.Conv.Channel,
		DM: in.Conv.DM, User: in.User.ID, Roles: in.User.Roles}
}

// shadowedBindings refuses a binding that can never be chosen because an
// earlier one with the same keys always wins: almost surely a mistake
// (two agents for one place), so serve and `pibot config check` name it.
func shadowedBindings(cfg config.Config) error {
	var errs []error
	for _, s := range binding.Shadowed(bindingRules(cfg)) {
		r := cfg.Bindings[s.Rule]
		errs = append(errs, &config.Error{Key: fmt.Sprintf("bindings[%d]", s.Rule),
			Msg: fmt.Sprintf("never matches (agent %s, %s): bindings[%d] (agent %s) has the same keys and comes first, so it always wins",
				r.Agent, bindingRules(cfg)[s.Rule].Keys(), s.By, cfg.Bindings[s.By].Agent)})
	}
	return errors.Join(errs...)
}
