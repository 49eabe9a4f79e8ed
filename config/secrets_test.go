package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// credentialName matches keys named like a credential: what issue 30.4
// found missed (http.metrics_token) must never be missed again.
var credentialName = regexp.MustCompile(`(^|_)(token|secret|password|passwd|api_key|key|credentials?|private)(_file)?$|(^|_)url$|^endpoint$|^(headers|env)$`)

// taggedKeys walks the schema and returns the key path (maps as *) of
// every field with a secret tag, failing on a field named like a
// credential that has none, or a tag on a field that cannot hold one.
func taggedKeys(t *testing.T, typ reflect.Type, path string, out map[string]string) {
	switch typ.Kind() {
	case reflect.Pointer, reflect.Slice:
		taggedKeys(t, typ.Elem(), path, out)
		return
	case reflect.Map:
		taggedKeys(t, typ.Elem(), join(path, "*"), out)
		return
	case reflect.Struct:
	default:
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := join(path, name)
		kind := f.Tag.Get("secret")
		holdsText := f.Type.Kind() == reflect.String || f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.String
		switch {
		case kind != "" && !holdsText:
			t.Errorf("%s: secret tag on a %s", key, f.Type)
		case kind != "" && kind != "value" && kind != "file" && kind != "url":
			t.Errorf("%s: secret tag %q (want value, file or url)", key, kind)
		case kind != "" && strings.HasSuffix(name, "_file") != (kind == "file"):
			t.Errorf("%s: secret tag %q on a key %s _file", key, kind, map[bool]string{true: "ending in", false: "not ending in"}[strings.HasSuffix(name, "_file")])
		case kind == "" && holdsText && credentialName.MatchString(name):
			t.Errorf("%s is named like a credential but has no secret tag: tag it so pibot scrubs it from its environment (and keeps tools away from its file)", key)
		case kind != "":
			out[key] = kind
		}
		if kind == "" {
			taggedKeys(t, f.Type, key, out)
		}
	}
}

// TestSecretsAudit: every key named like a credential is tagged, and
// Secrets returns every tagged key of a configuration that sets them all,
// each *_file with its file and content, each URL's password and query
// values only.
func TestSecretsAudit(t *testing.T) {
	tagged := map[string]string{}
	taggedKeys(t, reflect.TypeOf(Config{}), "", tagged)
	dir := t.TempDir()
	file := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(" from-"+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	yaml := `
http: {metrics_token_file: ` + file("metrics") + `}
cluster: {redis_url: "redis://user:redis-pass@127.0.0.1:6379/0", secret_file: ` + file("cluster") + `}
otel: {endpoint: "https://otel.example:4318/?token=otel-q"}
adapters:
  telegram: {token: tg-token, webhook_secret_file: ` + file("hook") + `, api_url: "https://u:tg-api-pass@tg.example/", webhook_url: "https://bot.example/hook?k=wh-q"}
  slack: {bot_token: xoxb-1, app_token_file: ` + file("app") + `, signing_secret: slack-sign, api_url: "https://slack.example/api/"}
  discord: {token_file: ` + file("discord") + `, api_url: "https://discord.example/"}
  web: {token: web-token-1234567890}
providers:
  p: {api: openai-completions, base_url: "https://llm.example/v1?key=base-q", api_key_file: ` + file("key") + `, headers: {X-Key: hdr-1}}
mcp:
  servers:
    s: {command: x, env: {TOKEN: mcp-env}, url: "", headers: {}}
    h: {url: "https://mcp.example/?auth=mcp-q", headers: {Authorization: "Bearer mcp-hdr"}}
`
	cfg, err := Parse(strings.NewReader(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	var values []string
	for _, s := range cfg.Secrets() {
		k := s.Key
		for _, m := range []string{"providers.p", "mcp.servers.s", "mcp.servers.h"} {
			if strings.HasPrefix(k, m+".") {
				k = strings.Replace(k, m, m[:strings.LastIndex(m, ".")]+".*", 1)
			}
		}
		if parts := strings.Split(k, "."); len(parts) > 1 && (parts[len(parts)-2] == "headers" || parts[len(parts)-2] == "env") {
			k = strings.Join(parts[:len(parts)-1], ".") // a map's entry: its key is the map's
		}
		got[k] = true
		if s.File != "" && !strings.HasPrefix(s.Value, "from-") {
			t.Errorf("%s: file %s read as %q", s.Key, s.File, s.Value)
		}
		values = append(values, s.Value)
	}
	for key := range tagged {
		if key == "adapters.slack.app_token" || key == "http.metrics_token" || key == "adapters.discord.token" ||
			key == "adapters.telegram.token_file" || key == "adapters.telegram.webhook_secret" || key == "adapters.slack.bot_token_file" ||
			key == "adapters.slack.signing_secret_file" || key == "adapters.web.token_file" || key == "providers.*.api_key" ||
			key == "adapters.slack.api_url" || key == "adapters.discord.api_url" || key == "cluster.secret" {
			continue // set the other way (value or file), or a URL without credentials, in the YAML above
		}
		if !got[key] {
			t.Errorf("Secrets misses the tagged key %s (set it in this test's configuration)", key)
		}
	}
	sort.Strings(values)
	for _, want := range []string{"redis-pass", "from-cluster", "otel-q", "tg-token", "from-hook", "tg-api-pass", "wh-q", "xoxb-1", "from-app", "slack-sign",
		"from-discord", "web-token-1234567890", "base-q", "from-key", "hdr-1", "mcp-env", "mcp-q", "Bearer mcp-hdr", "from-metrics"} {
		if !slices.Contains(values, want) {
			t.Errorf("Secrets misses %q; got %q", want, values)
		}
	}
	for _, v := range values {
		if strings.Contains(v, "://") || strings.Contains(v, "127.0.0.1") {
			t.Errorf("a whole URL is a secret: %q", v)
		}
	}
}
