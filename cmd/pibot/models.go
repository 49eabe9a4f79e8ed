package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers"
	"github.com/pibot/pibot/providers/faux"
)

// noModelHelp is what the chat says when no model can be used.
const noModelHelp = "No model is configured. Set OPENAI_API_KEY or ANTHROPIC_API_KEY in the environment and restart pibot, " +
	"or set `agent.model` (provider/model) and `providers.<name>` in a config file (`pibot config example` shows every key). " +
	"To try pibot without a key, configure the faux provider: `providers: {demo: {api: faux}}` and `agent: {model: demo/echo}`."

// providerConfigs turns the configured providers (sorted by name), then
// the built-in ones whose environment variables are set, into registry
// configurations. A configured provider hides a built-in one of the same
// name.
func providerConfigs(cfg config.Config, getenv func(string) string) ([]providers.Config, error) {
	names := make([]string, 0, len(cfg.Providers))
	for name := range cfg.Providers {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []providers.Config
	for _, name := range names {
		p := cfg.Providers[name]
		key := "providers." + name
		apiKey, err := config.ReadSecret(key+".api_key", p.APIKey, p.APIKeyFile)
		if err != nil {
			return nil, err
		}
		compat, err := decodeCompat(key+".compat", p.Compat)
		if err != nil {
			return nil, err
		}
		keySource := key + ".api_key"
		if p.APIKeyFile != "" {
			keySource = key + ".api_key_file"
		}
		pc := providers.Config{Name: name, API: p.API, BaseURL: p.BaseURL, APIKey: secret.New(apiKey), Headers: p.Headers, Compat: compat, KeySource: keySource,
			Timeouts: providers.Timeouts{Connect: p.Timeouts.Connect.D(), FirstByte: p.Timeouts.FirstByte.D(), Idle: p.Timeouts.Idle.D()}}
		for _, m := range p.Models {
			pc.Models = append(pc.Models, modelInfo(m))
		}
		script, err := fauxScript(key+".script", p.Script)
		if err != nil {
			return nil, err
		}
		pc.Script = script
		out = append(out, pc)
	}
	for _, d := range providers.Defaults(getenv) {
		if _, ok := cfg.Providers[d.Name]; !ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// decodeCompat converts the free-form compat map into the typed switches;
// an unknown switch is an error naming key.
func decodeCompat(key string, m map[string]any) (providers.Compat, error) {
	var c providers.Compat
	if len(m) == 0 {
		return c, nil
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return c, &config.Error{Key: key, Msg: err.Error()}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, &config.Error{Key: key, Msg: err.Error()}
	}
	return c, nil
}

// fauxScript converts a configured faux script; tool-call ids are numbered.
func fauxScript(key string, turns []config.FauxTurn) ([]faux.Turn, error) {
	var out []faux.Turn
	n := 0
	for i, t := range turns {
		ft := faux.Turn{Text: t.Text, Thinking: t.Thinking, Err: t.Error, Delay: t.Delay.D()}
		for j, c := range t.ToolCalls {
			args := c.Args
			if args == nil {
				args = map[string]any{}
			}
			b, err := json.Marshal(args)
			if err != nil {
				return nil, fmt.Errorf("config: %s[%d].tool_calls[%d].args: %w", key, i, j, err)
			}
			n++
			ft.Calls = append(ft.Calls, faux.Call(fmt.Sprintf("call_%d", n), c.Name, string(b)))
		}
		out = append(out, ft)
	}
	return out, nil
}

func modelInfo(m config.Model) llm.ModelInfo {
	mi := llm.ModelInfo{
		ID: m.ID, Name: m.Name, Reasoning: m.Reasoning, Input: m.Input,
		ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens,
		Cost: llm.ModelCost{Input: m.Cost.Input, Output: m.Cost.Output, CacheRead: m.Cost.CacheRead, CacheWrite: m.Cost.CacheWrite},
	}
	if len(m.ThinkingMap) > 0 {
		mi.ThinkingMap = map[llm.ThinkingLevel]*string{}
		for k, v := range m.ThinkingMap {
			mi.ThinkingMap[llm.ThinkingLevel(k)] = v
		}
	}
	return mi
}

// newRegistry builds the provider registry of cfg. fauxDelay is the
// per-token delay of faux models (negative: none).
func newRegistry(cfg config.Config, getenv func(string) string, log *slog.Logger, fauxDelay time.Duration) (*providers.Registry, error) {
	pcs, err := providerConfigs(cfg, getenv)
	if err != nil {
		return nil, err
	}
	return providers.NewRegistry(pcs, providers.Options{Logger: log, FauxDelay: fauxDelay, Retry: providerRetry(cfg)})
}

// providerRetry is the providers' own retry policy: none while the agent
// retries (agent.retry), so one failing call is retried by one policy, not
// by the provider's retries nested in each of the agent's.
func providerRetry(cfg config.Config) providers.RetryPolicy {
	if cfg.Agent.Retry.Enabled {
		return providers.RetryPolicy{MaxRetries: -1}
	}
	return providers.RetryPolicy{}
}

// defaultModel returns agent.model, or else the first configured model
// that has credentials ("" when there is none).
func defaultModel(cfg config.Config, reg *providers.Registry) string {
	if cfg.Agent.Model != "" {
		return cfg.Agent.Model
	}
	for _, m := range reg.List() {
		if m.HasCredentials {
			return m.Info.Ref()
		}
	}
	return ""
}

// noModelNotice is what the web chat shows in an empty conversation when
// no model can answer (noModelHelp), "" when one can.
func noModelNotice(cfg config.Config, getenv func(string) string) string {
	reg, err := newRegistry(cfg, getenv, slog.New(slog.DiscardHandler), 0)
	if err != nil || defaultModel(cfg, reg) != "" {
		return "" // a broken provider is refused at start, in its own words
	}
	return noModelHelp
}

// runModels runs `pibot models`.
func runModels(c *cli, args []string) error {
	fs := c.newFlags("models")
	file := configFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("models", pos, 0, "no arguments"); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(*file)
	if err != nil {
		return err
	}
	reg, err := newRegistry(cfg, c.getenv, nil, -1)
	if err != nil {
		return err
	}
	list := reg.List()
	if len(list) == 0 {
		fmt.Fprintln(c.stdout, "No models configured.")
		fmt.Fprintln(c.stdout, noModelHelp)
		return nil
	}
	def := defaultModel(cfg, reg)
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tAPI\tCONTEXT\tINPUT\tCREDENTIALS\tDEFAULT")
	for _, m := range list {
		cred := "missing"
		if m.HasCredentials {
			cred = "ok"
		}
		mark := ""
		if m.Info.Ref() == def {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", m.Info.Ref(), m.Info.API, m.Info.ContextWindow, strings.Join(m.Info.Input, ","), cred, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if def != "" && !slices.ContainsFunc(list, func(m providers.ModelStatus) bool { return m.Info.Ref() == def }) {
		if _, err := reg.Model(def); err != nil {
			fmt.Fprintf(c.stdout, "agent.model %s: %v\n", def, err)
		}
	}
	return nil
}
