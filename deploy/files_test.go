package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/tools/jail"
)

// read returns a file of the repository, relative to its root.
func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct{ op, args string }

func dockerfile(t *testing.T) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(read(t, "Dockerfile"), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		op, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(op), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

func TestDockerfile(t *testing.T) {
	ins := dockerfile(t)
	var froms []string
	final := map[string][]string{} // instructions of the last stage
	for _, in := range ins {
		if in.op == "FROM" {
			froms = append(froms, in.args)
			final = map[string][]string{}
		}
		final[in.op] = append(final[in.op], in.args)
	}
	all := func(op string) string {
		var s []string
		for _, in := range ins {
			if in.op == op {
				s = append(s, in.args)
			}
		}
		return strings.Join(s, "\n")
	}
	if len(froms) < 2 || !strings.Contains(froms[0], " AS build") {
		t.Errorf("want a multi-stage build with a build stage, FROM lines %q", froms)
	}
	for _, f := range froms {
		if strings.Contains(f, ":latest") || !strings.Contains(f, ":") {
			t.Errorf("FROM %s: pin the base image's tag", f)
		}
	}
	build := all("RUN")
	for _, w := range []string{"CGO_ENABLED=0", "-trimpath", "internal/buildinfo", ".version=", ".commit=", ".date=", "./cmd/pibot"} {
		if !strings.Contains(build, w) {
			t.Errorf("the build RUN lacks %q (a static, stamped binary)", w)
		}
	}
	runtime := strings.Join(final["RUN"], "\n")
	for _, pkg := range []string{"bash", "coreutils", "git", "ripgrep", "bubblewrap", "ca-certificates"} {
		if !regexp.MustCompile(`apk add[^&]*\s` + pkg + `(\s|$)`).MatchString(runtime) {
			t.Errorf("the runtime image does not install %s", pkg)
		}
	}
	if !strings.Contains(runtime, "chmod 0700 /data/state /data/workspace") {
		t.Error("the data directory and workspace are not private to the pibot user (chmod 0700)")
	}
	user := strings.Join(final["USER"], "")
	if user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("USER %q: the runtime must not run as root", user)
	}
	if !strings.Contains(strings.Join(final["VOLUME"], " "), `"/data"`) {
		t.Errorf("VOLUME %q: want /data", final["VOLUME"])
	}
	hc := strings.Join(final["HEALTHCHECK"], "")
	if !strings.Contains(hc, `CMD ["pibot", "healthcheck"]`) {
		t.Errorf("HEALTHCHECK %q: want pibot probing its own /healthz", hc)
	}
	if !slices.Contains(final["ENV"], "PIBOT_CONFIG=/etc/pibot/config.yaml") {
		t.Errorf("ENV %q: want PIBOT_CONFIG=/etc/pibot/config.yaml", final["ENV"])
	}
	if !slices.Contains(final["COPY"], "deploy/docker/config.yaml /etc/pibot/config.yaml") {
		t.Errorf("COPY %q: the image's configuration is not installed", final["COPY"])
	}
	if a := all("ADD"); a != "" {
		t.Errorf("ADD %q: use COPY", a)
	}
	ignore := read(t, ".dockerignore")
	for _, w := range []string{".git", "pibot-data", "pibot-workspace"} {
		if !slices.Contains(strings.Split(ignore, "\n"), w) {
			t.Errorf(".dockerignore does not keep %s out of the build context", w)
		}
	}
}

// load parses a configuration file of the repository with env.
func load(t *testing.T, name string, env map[string]string) config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", name), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s does not validate: %v", name, err)
	}
	return cfg
}

func TestImageConfig(t *testing.T) {
	cfg := load(t, "deploy/docker/config.yaml", nil)
	if cfg.DataDir != "/data/state" || cfg.Agent.Workspace != "/data/workspace" || cfg.HTTP.Listen != "0.0.0.0:8080" {
		t.Errorf("data_dir %q, workspace %q, listen %q: want both under the /data volume, listening on every address",
			cfg.DataDir, cfg.Agent.Workspace, cfg.HTTP.Listen)
	}
	if cfg.Adapter.Telegram.Enabled() || cfg.Adapter.Slack.Enabled() || cfg.Adapter.Discord.Enabled() {
		t.Errorf("a platform is on without its token: telegram %v, slack %v, discord %v", cfg.Adapter.Telegram.Enabled(), cfg.Adapter.Slack.Enabled(), cfg.Adapter.Discord.Enabled())
	}
	cfg = load(t, "deploy/docker/config.yaml", map[string]string{
		"TELEGRAM_BOT_TOKEN_FILE": "/run/secrets/tg", "PIBOT_WEB": "false", "PIBOT_MODEL": "openai/gpt-4.1", "PIBOT_SANDBOX": "bwrap",
	})
	if !cfg.Adapter.Telegram.Enabled() || cfg.Adapter.Telegram.TokenFile != "/run/secrets/tg" || cfg.WebEnabled() ||
		cfg.Agent.Model != "openai/gpt-4.1" || cfg.Agent.Sandbox != "bwrap" {
		t.Errorf("the environment does not reach the configuration: %+v", cfg)
	}
}

// TestImageConfigPlatforms: each platform of the image's configuration is
// on exactly when its token variable (or its *_FILE) is set, the others
// stay off rather than fail, and the settings reach their keys.
func TestImageConfigPlatforms(t *testing.T) {
	tests := []struct {
		name                     string
		env                      map[string]string
		telegram, slack, discord bool
		check                    func(t *testing.T, cfg config.Config)
	}{
		{name: "none", env: map[string]string{}},
		{name: "empty tokens", env: map[string]string{"TELEGRAM_BOT_TOKEN": "", "SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": "", "DISCORD_BOT_TOKEN": ""}},
		{name: "telegram", env: map[string]string{"TELEGRAM_BOT_TOKEN": "1:x"}, telegram: true},
		{name: "slack socket", env: map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, slack: true,
			check: func(t *testing.T, cfg config.Config) {
				if s := cfg.Adapter.Slack; s.BotToken != "xoxb-1" || s.AppToken != "xapp-1" || s.Mode != "socket" {
					t.Errorf("slack %+v", s)
				}
			}},
		{name: "slack http from files", env: map[string]string{"SLACK_BOT_TOKEN_FILE": "/run/secrets/slack_bot", "SLACK_MODE": "http",
			"SLACK_SIGNING_SECRET_FILE": "/run/secrets/slack_signing"}, slack: true,
			check: func(t *testing.T, cfg config.Config) {
				if s := cfg.Adapter.Slack; s.BotTokenFile != "/run/secrets/slack_bot" || s.SigningSecretFile != "/run/secrets/slack_signing" || s.Mode != "http" {
					t.Errorf("slack %+v", s)
				}
			}},
		{name: "discord", env: map[string]string{"DISCORD_BOT_TOKEN": "abc.def", "DISCORD_APPLICATION_ID": "123456789012345678"}, discord: true,
			check: func(t *testing.T, cfg config.Config) {
				if d := cfg.Adapter.Discord; d.Token != "abc.def" || d.ApplicationID != "123456789012345678" {
					t.Errorf("discord %+v", d)
				}
			}},
		{name: "discord from a file", env: map[string]string{"DISCORD_BOT_TOKEN_FILE": "/run/secrets/discord"}, discord: true},
		{name: "all three", env: map[string]string{"TELEGRAM_BOT_TOKEN": "1:x", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1",
			"DISCORD_BOT_TOKEN": "abc.def"}, telegram: true, slack: true, discord: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["PIBOT_WEB_TOKEN"] = strings.Repeat("ab", 16)
			cfg := load(t, "deploy/docker/config.yaml", tt.env)
			if cfg.Adapter.Telegram.Enabled() != tt.telegram || cfg.Adapter.Slack.Enabled() != tt.slack || cfg.Adapter.Discord.Enabled() != tt.discord {
				t.Errorf("telegram %v, slack %v, discord %v; want %v, %v, %v", cfg.Adapter.Telegram.Enabled(), cfg.Adapter.Slack.Enabled(), cfg.Adapter.Discord.Enabled(),
					tt.telegram, tt.slack, tt.discord)
			}
			if tt.check != nil {
				tt.check(t, cfg)
			}
		})
	}
	// Half a Slack setup is an error naming the key, not a silent "off".
	cfg, err := config.Load(filepath.Join("..", "deploy/docker/config.yaml"), func(k string) string {
		return map[string]string{"SLACK_APP_TOKEN": "xapp-1"}[k]
	})
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "adapters.slack.bot_token") {
		t.Errorf("an app token without a bot token: %v", err)
	}
}

// unit parses a systemd unit into "Section.Key" -> values.
func unit(t *testing.T, name string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	section := ""
	for _, line := range strings.Split(read(t, name), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", name, line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

func TestSystemdUnit(t *testing.T) {
	u := unit(t, "deploy/systemd/pibot.service")
	one := func(k string) string { return strings.Join(u["Service."+k], " ") }
	for k, v := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"User": "pibot", "Delegate": "yes", "CapabilityBoundingSet": "", "KillSignal": "SIGTERM",
	} {
		if got, ok := u["Service."+k]; !ok || one(k) != v {
			t.Errorf("%s=%q (set: %v), want %q", k, strings.Join(got, " "), ok, v)
		}
	}
	if !strings.HasPrefix(one("ExecStart"), "/usr/local/bin/pibot serve -c /etc/pibot/config.yaml") {
		t.Errorf("ExecStart=%q", one("ExecStart"))
	}
	if one("TimeoutStopSec") != "45s" {
		t.Errorf("TimeoutStopSec=%q: give the 20 s drain room", one("TimeoutStopSec"))
	}
	checkTasks(t, "TasksMax", one("TasksMax"))
	// The configuration it ships must be writable where the unit allows.
	dir := t.TempDir()
	creds := map[string]string{}
	for _, lc := range u["Service.LoadCredential"] {
		id, _, _ := strings.Cut(lc, ":")
		creds[id] = filepath.Join(dir, id)
		if err := os.WriteFile(creds[id], []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := load(t, "deploy/systemd/config.yaml", map[string]string{"CREDENTIALS_DIRECTORY": dir})
	rw := strings.Fields(one("ReadWritePaths"))
	for _, p := range []string{cfg.DataDir, cfg.Agent.Workspace} {
		if !slices.ContainsFunc(rw, func(r string) bool { return p == r || strings.HasPrefix(p, r+"/") }) {
			t.Errorf("%s is not under ReadWritePaths=%v: ProtectSystem=strict makes it read-only", p, rw)
		}
	}
	if cfg.Adapter.Telegram.TokenFile != creds["telegram_token"] || cfg.Providers["openai"].APIKeyFile != creds["openai_api_key"] {
		t.Errorf("the configuration does not read the loaded credentials: telegram %q, openai %q; want %v",
			cfg.Adapter.Telegram.TokenFile, cfg.Providers["openai"].APIKeyFile, creds)
	}
	if cfg.Adapter.Telegram.Token != "" || cfg.Providers["openai"].APIKey != "" {
		t.Error("a secret is written in the configuration itself")
	}
	t.Run("systemd-analyze verify", func(t *testing.T) {
		if _, err := exec.LookPath("systemd-analyze"); err != nil {
			t.Skip("systemd-analyze is not installed")
		}
		// verify wants ExecStart's binary to exist; it prints every unknown
		// key or bad value (and still exits 0), so any output fails.
		unitFile := filepath.Join(t.TempDir(), "pibot.service")
		text := strings.ReplaceAll(read(t, "deploy/systemd/pibot.service"), "/usr/local/bin/pibot", "/bin/true")
		if err := os.WriteFile(unitFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "systemd-analyze", "verify", unitFile).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
}

func TestCompose(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Build struct {
				Context string `yaml:"context"`
			} `yaml:"build"`
			Volumes   []string `yaml:"volumes"`
			EnvFile   string   `yaml:"env_file"`
			Ports     []string `yaml:"ports"`
			CapDrop   []string `yaml:"cap_drop"`
			ReadOnly  bool     `yaml:"read_only"`
			PidsLimit string   `yaml:"pids_limit"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "deploy/docker-compose.yml")), &c); err != nil {
		t.Fatal(err)
	}
	s, ok := c.Services["pibot"]
	if !ok || len(c.Services) != 1 {
		t.Fatalf("want one service, pibot: %+v", c.Services)
	}
	if s.Build.Context != ".." || !slices.Contains(s.Volumes, "pibot-data:/data") || !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
		t.Errorf("service %+v: want the root Dockerfile, a /data volume, a read-only root and no capabilities", s)
	}
	checkTasks(t, "pids_limit", s.PidsLimit)
	for _, p := range s.Ports {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("port %q is published on every address", p)
		}
	}
	example := read(t, "deploy/"+s.EnvFile+".example")
	for _, v := range []string{"OPENAI_API_KEY=", "TELEGRAM_BOT_TOKEN=", "PIBOT_WEB_TOKEN="} {
		if !strings.Contains(example, v) {
			t.Errorf("deploy/%s.example lacks %s", s.EnvFile, v)
		}
	}
}

// composeService is the part of a compose service the tests check.
type composeService struct {
	Build struct {
		Context string `yaml:"context"`
	} `yaml:"build"`
	Image       string            `yaml:"image"`
	Hostname    string            `yaml:"hostname"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   []string          `yaml:"depends_on"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	EnvFile     string            `yaml:"env_file"`
	Command     []string          `yaml:"command"`
	PidsLimit   string            `yaml:"pids_limit"`
}

// pibotTasks is what pibot itself may run beside its tools: its threads
// (10 to 40) and its hooks' and MCP servers' processes.
const pibotTasks = 64

// checkTasks checks a service's task limit (TasksMax, pids_limit): set,
// and high enough that what it leaves the tools beside pibot, less the
// reserve the jail keeps for pibot, holds one call at the default
// agent.limits.processes.
func checkTasks(t *testing.T, key, value string) {
	t.Helper()
	n, err := strconv.Atoi(value)
	if err != nil {
		t.Fatalf("%s=%q: want a number of tasks (the tools' budget is what it leaves beside pibot)", key, value)
	}
	if tools, want := n-pibotTasks-jail.Reserve(n), config.DefaultLimits().Processes; tools < want {
		t.Errorf("%s=%d leaves the tools %d tasks (%d kept for pibot), fewer than one call's default limit of %d", key, n, tools, jail.Reserve(n), want)
	}
}

// TestComposeCluster: the cluster compose file runs Redis, three replicas
// of the image on one data volume, and, for webhook mode, a round-robin
// proxy whose configuration names every replica at the port the image
// listens on; the replicas' webhook URL is the proxy's domain.
func TestComposeCluster(t *testing.T) {
	var c struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "deploy/docker-compose.cluster.yml")), &c); err != nil {
		t.Fatal(err)
	}
	var replicas []string
	for name, s := range c.Services {
		if s.Build.Context == ".." {
			replicas = append(replicas, name)
			checkTasks(t, name+" pids_limit", s.PidsLimit)
			if !slices.Contains(s.Volumes, "pibot-data:/data") || s.Hostname != name {
				t.Errorf("replica %s: want the shared /data volume and its own host name: %+v", name, s)
			}
			// Issue 30: the URL carries the password Redis asks for, and
			// the cluster secret is required, both from deploy/.env.
			if u := s.Environment["PIBOT_REDIS_URL"]; !strings.HasPrefix(u, "redis://:${PIBOT_REDIS_PASSWORD:?") || !strings.HasSuffix(u, "}@redis:6379/0") {
				t.Errorf("replica %s: PIBOT_REDIS_URL %q, want redis://:${PIBOT_REDIS_PASSWORD:?...}@redis:6379/0", name, u)
			}
			if !strings.HasPrefix(s.Environment["PIBOT_CLUSTER_SECRET"], "${PIBOT_CLUSTER_SECRET:?") {
				t.Errorf("replica %s: PIBOT_CLUSTER_SECRET %q, want it required from deploy/.env", name, s.Environment["PIBOT_CLUSTER_SECRET"])
			}
		}
	}
	slices.Sort(replicas)
	if !slices.Equal(replicas, []string{"pibot-1", "pibot-2", "pibot-3"}) {
		t.Fatalf("replicas %q, want pibot-1..3", replicas)
	}
	redisSvc, ok := c.Services["redis"]
	if !ok {
		t.Error("no redis service")
	}
	cmd := strings.Join(redisSvc.Command, " ")
	if !strings.Contains(cmd, "requirepass") || !strings.Contains(cmd, "$$REDIS_PASSWORD") ||
		!strings.Contains(cmd, "--maxmemory-policy noeviction") || !strings.HasPrefix(redisSvc.Environment["REDIS_PASSWORD"], "${PIBOT_REDIS_PASSWORD:?") {
		t.Errorf("redis service: command %q, environment %v; want requirepass from PIBOT_REDIS_PASSWORD and noeviction", cmd, redisSvc.Environment)
	}
	if env := read(t, "deploy/cluster.env.example"); !strings.Contains(env, "PIBOT_REDIS_PASSWORD=") || !strings.Contains(env, "PIBOT_CLUSTER_SECRET=") {
		t.Errorf("deploy/cluster.env.example lacks PIBOT_REDIS_PASSWORD= or PIBOT_CLUSTER_SECRET=")
	}
	proxy, ok := c.Services["proxy"]
	if !ok {
		t.Fatal("no proxy service in front of the replicas")
	}
	if !strings.HasPrefix(proxy.Image, "caddy:") || strings.HasSuffix(proxy.Image, ":latest") {
		t.Errorf("proxy image %q: want the official Caddy image with a pinned tag", proxy.Image)
	}
	if !slices.Equal(proxy.Profiles, []string{"webhook"}) {
		t.Errorf("proxy profiles %q: want it started for webhook mode only (polling needs none)", proxy.Profiles)
	}
	for _, r := range replicas {
		if !slices.Contains(proxy.DependsOn, r) {
			t.Errorf("the proxy does not depend on %s", r)
		}
	}
	// The replicas register https://PIBOT_DOMAIN with Telegram; the
	// proxy serves that domain.
	domain := proxy.Environment["PIBOT_DOMAIN"]
	if domain == "" {
		t.Fatal("the proxy has no PIBOT_DOMAIN")
	}
	for _, r := range replicas {
		if got := c.Services[r].Environment["TELEGRAM_WEBHOOK_URL"]; got != "https://"+domain {
			t.Errorf("%s: TELEGRAM_WEBHOOK_URL %q, want https://%s", r, got, domain)
		}
	}
	var caddyfile string
	for _, v := range proxy.Volumes {
		if src, dst, _ := strings.Cut(strings.TrimSuffix(v, ":ro"), ":"); dst == "/etc/caddy/Caddyfile" {
			caddyfile = strings.TrimPrefix(src, "./")
		}
	}
	if caddyfile == "" {
		t.Fatalf("the proxy mounts no /etc/caddy/Caddyfile: %q", proxy.Volumes)
	}
	conf := read(t, "deploy/"+caddyfile)
	if !strings.Contains(conf, "{$PIBOT_DOMAIN}") {
		t.Errorf("deploy/%s does not serve {$PIBOT_DOMAIN}", caddyfile)
	}
	var upstreams []string
	policy := ""
	for _, line := range strings.Split(conf, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "reverse_proxy":
			upstreams = append(upstreams, slices.DeleteFunc(f[1:], func(s string) bool { return s == "{" })...)
		case len(f) == 2 && f[0] == "lb_policy":
			policy = f[1]
		}
	}
	_, port, _ := strings.Cut(load(t, "deploy/docker/config.yaml", nil).HTTP.Listen, ":")
	var want []string
	for _, r := range replicas {
		want = append(want, r+":"+port)
	}
	slices.Sort(upstreams)
	if !slices.Equal(upstreams, want) || policy != "round_robin" {
		t.Errorf("deploy/%s: upstreams %q with lb_policy %q, want %q round_robin", caddyfile, upstreams, policy, want)
	}
	// A replica in webhook mode: the image configuration takes the mode,
	// URL and secret from the environment and validates in cluster mode.
	cfg := load(t, "deploy/docker/config.yaml", map[string]string{
		"TELEGRAM_BOT_TOKEN": "1:x", "PIBOT_WEB": "false", "PIBOT_REDIS_URL": "redis://:pw@redis:6379/0",
		"PIBOT_CLUSTER_SECRET": "0123456789abcdef0123456789abcdef",
		"TELEGRAM_MODE":        "webhook", "TELEGRAM_WEBHOOK_URL": "https://" + domain, "TELEGRAM_WEBHOOK_SECRET": "s3cret",
	})
	tg := cfg.Adapter.Telegram
	if tg.Mode != "webhook" || tg.WebhookURL != "https://"+domain || tg.WebhookSecret != "s3cret" {
		t.Errorf("the webhook settings do not reach the configuration: %+v", tg)
	}
}
