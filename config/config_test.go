package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestExampleParsesAndValidates(t *testing.T) {
	cfg, err := Parse(strings.NewReader(Example), env(nil))
	if err != nil {
		t.Fatalf("Parse(example) = %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("example does not validate: %v", err)
	}
}

// TestExampleDocumentsEveryKey walks the schema and checks every key path
// appears in config.example.yaml.
func TestExampleDocumentsEveryKey(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(Example), &root); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := path + "." + n.Content[i].Value
				if path == ".providers" || path == ".hooks" || path == ".mcp.servers" {
					p = path + ".*"
				}
				have[p] = true
				walk(n.Content[i+1], p)
			}
		}
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				walk(c, path+"[]")
			}
		}
		if n.Kind == yaml.DocumentNode {
			walk(n.Content[0], path)
		}
	}
	walk(&root, "")
	var want []string
	var schema func(t reflect.Type, path string)
	schema = func(tp reflect.Type, path string) {
		for tp.Kind() == reflect.Pointer {
			tp = tp.Elem()
		}
		switch tp.Kind() {
		case reflect.Struct:
			if tp == reflect.TypeOf(Duration(0)) {
				return
			}
			for i := 0; i < tp.NumField(); i++ {
				tag, _, _ := strings.Cut(tp.Field(i).Tag.Get("yaml"), ",")
				if tag == "-" {
					continue // not a key (Config.File)
				}
				want = append(want, path+"."+tag)
				schema(tp.Field(i).Type, path+"."+tag)
			}
		case reflect.Slice:
			schema(tp.Elem(), path+"[]")
		case reflect.Map:
			if path == ".providers" || path == ".hooks" || path == ".mcp.servers" {
				schema(tp.Elem(), path+".*")
			}
		}
	}
	schema(reflect.TypeOf(Config{}), "")
	for _, k := range want {
		if !have[k] {
			t.Errorf("config.example.yaml does not document %s", strings.TrimPrefix(k, "."))
		}
	}
}

func TestRootExampleMatchesEmbedded(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Fatalf("read root config.example.yaml: %v", err)
	}
	if string(b) != Example {
		t.Fatal("config.example.yaml at the repository root differs from config/config.example.yaml; copy it")
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        map[string]string
		wantKey    string
	}{
		{"unknown top-level", "bogus: 1\n", nil, "bogus"},
		{"unknown nested", "agent:\n  modle: x/y\n", nil, "agent.modle"},
		{"unknown in provider model", "providers:\n  p:\n    api: faux\n    models:\n      - id: a\n        ctx: 1\n", nil, "providers.p.models[0].ctx"},
		{"missing env", "agent:\n  model: ${NOPE}\n", nil, "${NOPE}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.yaml), env(tt.env))
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tt.wantKey {
				t.Fatalf("Parse error = %v, want key %q", err, tt.wantKey)
			}
		})
	}
}

func TestValidateNamesKeys(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Config)
		wantKey string
	}{
		{"queue mode", func(c *Config) { c.Agent.Queue.Mode = "shout" }, "agent.queue.mode"},
		{"dm policy", func(c *Config) { c.Access.DMPolicy = "everyone" }, "access.dm_policy"},
		{"negative budget", func(c *Config) { c.Access.Budget.PerMinute = -1 }, "access.budget.per_minute"},
		{"budget without burst", func(c *Config) { c.Access.Budget.Burst = 0 }, "access.budget.burst"},
		{"negative schedule cap", func(c *Config) { c.Access.SchedulesPerUser = -1 }, "access.schedules_per_user"},
		{"model ref", func(c *Config) { c.Agent.Model = "gpt" }, "agent.model"},
		{"tool", func(c *Config) { c.Agent.Tools = []string{"rm"} }, "agent.tools[0]"},
		{"approval", func(c *Config) { c.Agent.Approvals.Group["bash"] = "maybe" }, "agent.approvals.group.bash"},
		{"telegram webhook", func(c *Config) { c.Adapter.Telegram.Token = "1:x"; c.Adapter.Telegram.Mode = "webhook" }, "adapters.telegram.webhook_url"},
		{"provider api", func(c *Config) { c.Providers = map[string]Provider{"x": {API: "soap"}} }, "providers.x.api"},
		{"listen", func(c *Config) { c.HTTP.Listen = "8080" }, "http.listen"},
		{"cluster", func(c *Config) { c.Cluster.RedisURL = "http://127.0.0.1:6379" }, "cluster.redis_url"},
		{"negative max_run", func(c *Config) { c.Agent.MaxRun = -1 }, "agent.max_run"},
		{"negative max_idle", func(c *Config) { c.Agent.MaxIdle = -1 }, "agent.max_idle"},
		{"max_idle within an approval wait", func(c *Config) { c.Agent.MaxIdle = c.Agent.Approvals.Timeout }, "agent.max_idle"},
		{"slack socket without app token", func(c *Config) { c.Adapter.Slack.BotToken = "xoxb-1" }, "adapters.slack.app_token"},
		{"slack http without signing secret", func(c *Config) {
			c.Adapter.Slack = Slack{BotToken: "xoxb-1", Mode: "http"}
		}, "adapters.slack.signing_secret"},
		{"slack mode", func(c *Config) { c.Adapter.Slack = Slack{BotToken: "xoxb-1", AppToken: "xapp-1", Mode: "rtm"} }, "adapters.slack.mode"},
		{"slack app token without bot token", func(c *Config) { c.Adapter.Slack.AppToken = "xapp-1" }, "adapters.slack.bot_token"},
		{"slack both token forms", func(c *Config) {
			c.Adapter.Slack = Slack{BotToken: "xoxb-1", BotTokenFile: "/f", AppToken: "xapp-1"}
		}, "adapters.slack.bot_token"},
		{"slack api url slash", func(c *Config) {
			c.Adapter.Slack = Slack{BotToken: "xoxb-1", AppToken: "xapp-1", APIURL: "https://slack.example/api"}
		}, "adapters.slack.api_url"},
		{"slack command", func(c *Config) {
			c.Adapter.Slack = Slack{BotToken: "xoxb-1", AppToken: "xapp-1", Command: "pi"}
		}, "adapters.slack.command"},
		// Values that were taken silently for something else (issue 30.6).
		{"negative idle_evict", func(c *Config) { c.Agent.IdleEvict = -1 }, "agent.idle_evict"},
		{"negative tool_timeout", func(c *Config) { c.Agent.ToolTimeout = -1 }, "agent.tool_timeout"},
		{"negative approval timeout", func(c *Config) { c.Agent.Approvals.Timeout = -1 }, "agent.approvals.timeout"},
		{"negative debounce", func(c *Config) { c.Agent.Queue.Collect.Debounce = -1 }, "agent.queue.collect.debounce"},
		{"negative retry delay", func(c *Config) { c.Agent.Retry.BaseDelay = -1 }, "agent.retry.base_delay"},
		{"negative faux delay", func(c *Config) {
			c.Providers = map[string]Provider{"f": {API: "faux", Script: []FauxTurn{{Text: "x", Delay: -1}}}}
		}, "providers.f.script[0].delay"},
		{"negative price", func(c *Config) {
			c.Providers = map[string]Provider{"f": {API: "faux", Models: []Model{{ID: "m", Cost: ModelCost{Output: -2}}}}}
		}, "providers.f.models[0].cost"},
		{"thinking map level", func(c *Config) {
			c.Providers = map[string]Provider{"f": {API: "faux", Models: []Model{{ID: "m", ThinkingMap: map[string]*string{"max": nil}}}}}
		}, "providers.f.models[0].thinking_map.max"},
		{"owner platform", func(c *Config) { c.Access.Owners = []string{"telegarm:1"} }, "access.owners[0]"},
		{"user entry", func(c *Config) { c.Access.Users = []string{"web:local", "nocolon"} }, "access.users[1]"},
		{"group platform", func(c *Config) { c.Access.Groups = []string{"slak:C1"} }, "access.groups[0]"},
		{"schedule platform", func(c *Config) {
			c.Schedules = []Schedule{{Name: "s", Cron: "@daily", Location: "telgram::1", From: "1", Prompt: "hi"}}
		}, "schedules[0].location"},
		{"webhook url without webhook mode", func(c *Config) {
			c.Adapter.Telegram = Telegram{Token: "1:x", WebhookURL: "https://bot.example/tg"}
		}, "adapters.telegram.webhook_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("Validate() = %v, want it to name %q", err, tt.wantKey)
			}
		})
	}
}

// Each mode accepts the token of the other mode unused (pinned by #12).
func TestSlackModesAcceptUnusedTokens(t *testing.T) {
	for _, s := range []Slack{
		{BotToken: "xoxb-1", AppToken: "xapp-1", SigningSecret: "unused"},
		{BotToken: "xoxb-1", AppToken: "unused", SigningSecret: "s", Mode: "http"},
		{BotToken: "xoxb-1", SigningSecret: "s", Mode: "http", APIURL: "http://127.0.0.1:1/api/", Command: "/ask-pi"},
	} {
		c := Default()
		c.HTTP.Listen = "127.0.0.1:8080"
		c.Adapter.Slack = s
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

func TestEnvExpansionAndDurations(t *testing.T) {
	y := "agent:\n  model: ${PROV}/m1\n  idle_evict: 90s\n  queue:\n    collect:\n      debounce: ${DEB:-250ms}\n"
	cfg, err := Parse(strings.NewReader(y), env(map[string]string{"PROV": "faux"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Model != "faux/m1" || cfg.Agent.IdleEvict.D().Seconds() != 90 || cfg.Agent.Queue.Collect.Debounce.D().Milliseconds() != 250 {
		t.Fatalf("got %+v", cfg.Agent)
	}
	if cfg.DataDir != "./pibot-data" {
		t.Fatalf("defaults lost: data_dir = %q", cfg.DataDir)
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadSecret("adapters.telegram.token", "", p); err != nil || v != "s3cret" {
		t.Fatalf("ReadSecret = %q, %v", v, err)
	}
	if _, err := ReadSecret("k", "a", p); err == nil {
		t.Fatal("both value and file: want error")
	}
	_, err := ReadSecret("k", "", filepath.Join(dir, "missing"))
	if err == nil || !strings.Contains(err.Error(), "k_file") {
		t.Fatalf("missing file error = %v", err)
	}
}

func TestDiscordValidation(t *testing.T) {
	tests := []struct {
		name    string
		d       Discord
		wantKey string
	}{
		{"ok", Discord{Token: "t", Guilds: []string{"123456789012345678"}, ApplicationID: "42", Command: "pi"}, ""},
		{"token file", Discord{TokenFile: "/run/secrets/discord"}, ""},
		{"keys without token", Discord{Guilds: []string{"1"}}, "adapters.discord.token"},
		{"guild not an id", Discord{Token: "t", Guilds: []string{"my-server"}}, "adapters.discord.guilds[0]"},
		{"application id", Discord{Token: "t", ApplicationID: "abc"}, "adapters.discord.application_id"},
		{"command", Discord{Token: "t", Command: "Pi Bot"}, "adapters.discord.command"},
		{"api url path", Discord{Token: "t", APIURL: "http://127.0.0.1:1/api/v10"}, "adapters.discord.api_url"},
		{"api url scheme", Discord{Token: "t", APIURL: "ftp://x"}, "adapters.discord.api_url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Adapter.Discord = tc.d
			err := c.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantKey+":") {
				t.Fatalf("Validate: %v, want an error naming %s", err, tc.wantKey)
			}
		})
	}
}

func TestDiscordGuildIDsAreStrings(t *testing.T) {
	c, err := Parse(strings.NewReader("adapters:\n  discord:\n    token: t\n    guilds: [\"123456789012345678\"]\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Adapter.Discord.Guilds; len(got) != 1 || got[0] != "123456789012345678" || !c.Adapter.Discord.Enabled() {
		t.Fatalf("guilds = %q, enabled %v", got, c.Adapter.Discord.Enabled())
	}
}

func TestValidateExtend(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want string // "" means valid
	}{
		{"ok", func(c *Config) {
			c.Hooks = map[string]Hook{"guard": {Command: "/bin/guard", Events: []string{"tool_call", "input"}, Fail: "closed"}}
		}, ""},
		{"relative command", func(c *Config) { c.Hooks = map[string]Hook{"g": {Command: "./guard.py", Events: []string{"input"}}} }, "hooks.g.command"},
		{"no command", func(c *Config) { c.Hooks = map[string]Hook{"g": {Events: []string{"input"}}} }, "hooks.g.command"},
		{"no events", func(c *Config) { c.Hooks = map[string]Hook{"g": {Command: "x"}} }, "hooks.g.events"},
		{"unknown event", func(c *Config) { c.Hooks = map[string]Hook{"g": {Command: "x", Events: []string{"turn_start"}}} }, "hooks.g.events[0]"},
		{"bad fail", func(c *Config) {
			c.Hooks = map[string]Hook{"g": {Command: "x", Events: []string{"input"}, Fail: "maybe"}}
		}, "hooks.g.fail"},
		{"negative timeout", func(c *Config) {
			c.Hooks = map[string]Hook{"g": {Command: "x", Events: []string{"input"}, Timeout: -1}}
		}, "hooks.g.timeout"},
		{"bad name", func(c *Config) { c.Hooks = map[string]Hook{"a b": {Command: "x", Events: []string{"input"}}} }, "hooks.a b"},
		{"empty skills dir", func(c *Config) { c.Agent.Skills = []string{""} }, "agent.skills[0]"},
		{"empty prompts dir", func(c *Config) { c.Agent.Prompts = []string{"ok", " "} }, "agent.prompts[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.edit(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
