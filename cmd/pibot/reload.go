package main

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/gateway/spend"
)

// reloadable names the keys a SIGHUP applies to the running gateway:
// access but its budget and schedule cap, which are read at start.
var reloadable = []string{"access.owners", "access.users", "access.dm_policy", "access.groups", "access.mention_required",
	"agent.approvals.dm", "agent.approvals.group", "agent.spend", "limits", "bindings"}

// accessPolicy is the access policy of cfg (the local adapters' users are
// owners).
func accessPolicy(cfg config.Config) access.Policy {
	return access.Policy{
		Owners:          append(slices.Clone(cfg.Access.Owners), localOwners()...),
		Users:           cfg.Access.Users,
		DMPolicy:        cfg.Access.DMPolicy,
		Groups:          cfg.Access.Groups,
		MentionRequired: cfg.MentionRequired(),
	}
}

// spendCaps are the daily spend caps of cfg (the top-level limits key).
func spendCaps(cfg config.Config) spend.Caps {
	return caps(cfg.Limits)
}

// caps are the spend caps l configures.
func caps(l config.SpendLimits) spend.Caps {
	c := func(s config.SpendCap) spend.Cap { return spend.Cap{USD: s.DailyUSD, Tokens: s.DailyTokens} }
	return spend.Caps{PerUser: c(l.PerUser), PerConversation: c(l.PerConversation), Global: c(l.Global)}
}

// agentSpendCaps are the agents' spend caps of cfg (agent.spend,
// agents.NAME.spend), by agent name; agents without caps are left out.
func agentSpendCaps(cfg config.Config) map[string]spend.AgentCaps {
	out := map[string]spend.AgentCaps{}
	for _, name := range cfg.AgentNames() {
		if a, _ := cfg.AgentConfig(name); a.Spend.Enabled() {
			out[name] = spend.AgentCaps{Key: config.AgentKey(name) + ".spend", Caps: caps(a.Spend)}
		}
	}
	return out
}

// reloader re-reads the configuration file on SIGHUP and applies what can
// change while pibot runs: access lists and policies, the approval
// policies and the spend caps. Every other key keeps its running value;
// the log names those that changed in the file (a restart applies them).
type reloader struct {
	load    func() (config.Config, error)
	st      *stack
	log     *slog.Logger
	running config.Config
}

// notifyHUP starts catching SIGHUP (whose default action ends the
// process); stop undoes it.
func notifyHUP() (hup <-chan os.Signal, stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}

// run reloads on every signal on hup until ctx ends.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload()
		}
	}
}

// reload applies the file once.
func (r *reloader) reload() {
	cfg, err := r.load()
	if err != nil {
		r.log.Error("reload: the configuration file is not valid; keeping the running configuration", "err", err)
		return
	}
	r.st.access.SetPolicy(accessPolicy(cfg))
	r.st.gw.SetApprovals(cfg.Agent.Approvals.DM, cfg.Agent.Approvals.Group)
	r.st.spend.SetCaps(spendCaps(cfg))
	r.st.spend.SetAgentCaps(agentSpendCaps(cfg))
	bindingsApplied := r.reloadAgents(cfg)
	// What runs now: the reloaded keys of cfg, the rest as before.
	next := r.running
	next.Access, next.Agent.Approvals.DM, next.Agent.Approvals.Group, next.Limits = cfg.Access, cfg.Agent.Approvals.DM, cfg.Agent.Approvals.Group, cfg.Limits
	next.Agent.Spend = cfg.Agent.Spend
	next.Access.Budget, next.Access.SchedulesPerUser = r.running.Access.Budget, r.running.Access.SchedulesPerUser
	if bindingsApplied {
		next.Bindings = cfg.Bindings
	}
	// The named agents' approvals and spend caps were applied; their
	// other keys wait for a restart.
	next.Agents = maps.Clone(r.running.Agents)
	for name, a := range next.Agents {
		if c, ok := cfg.Agents[name]; ok {
			a.Approvals.DM, a.Approvals.Group, a.Spend = c.Approvals.DM, c.Approvals.Group, c.Spend
			next.Agents[name] = a
		}
	}
	// What the file says and does not run now: keys that need a restart.
	stale := changedKeys(next, cfg, reloadable)
	r.running = next
	if len(stale) > 0 {
		r.log.Warn("configuration reloaded; changed keys that need a restart were NOT applied",
			"reloaded", strings.Join(reloadable, ", "), "not_reloaded", strings.Join(stale, ", "))
		return
	}
	r.log.Info("configuration reloaded", "reloaded", strings.Join(reloadable, ", "))
}

// changedKeys lists the dotted yaml keys whose values differ between a
// and b, skipping the keys in skip (and everything under them). Only
// names are returned, never values (they may be secrets).
func changedKeys(a, b config.Config, skip []string) []string {
	var out []string
	diffValue(reflect.ValueOf(a), reflect.ValueOf(b), "", skip, &out)
	return out
}

func diffValue(a, b reflect.Value, prefix string, skip []string, out *[]string) {
	if slices.Contains(skip, prefix) {
		return
	}
	if a.Kind() != reflect.Struct {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, prefix)
		}
		return
	}
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if prefix != "" {
			name = prefix + "." + name
		}
		diffValue(a.Field(i), b.Field(i), name, skip, out)
	}
}

// reloadAgents applies the bindings (sessions keep their agents; a new
// session, after /new, is routed by them) and the named agents'
// approval policies.
//
// It reports whether the bindings were applied.
func (r *reloader) reloadAgents(cfg config.Config) bool {
	if r.st.router == nil {
		return false
	}
	applied := true
	if err := r.st.router.set(cfg, r.running); err != nil {
		r.log.Error("reload: bindings not applied; keeping the running ones", "err", err)
		applied = false
	}
	tables := map[string][2]map[string]string{}
	for name, a := range cfg.Agents {
		tables[name] = [2]map[string]string{a.Approvals.DM, a.Approvals.Group}
	}
	r.st.gw.SetAgentApprovals(tables)
	return applied
}
