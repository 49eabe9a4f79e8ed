package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigCheckBindings: `pibot config check` (and serve, in the same
// words) refuses a binding that names no agent and one an earlier binding
// always beats, naming the key of each.
func TestConfigCheckBindings(t *testing.T) {
	const base = "data_dir: ./d\nhttp: {listen: '127.0.0.1:0'}\nagent: {workspace: ./ws}\nagents: {ops: {workspace: ./ops}, web: {workspace: ./web}}\n"
	tests := []struct {
		name, bindings, key, msg string
	}{
		{"unknown agent", "bindings: [{agent: ops, platform: slack, channel: C0OPS}, {agent: opz, platform: slack, channel: C0X}]\n",
			"bindings[1].agent", `"opz" names no agent`},
		{"shadowed binding", "bindings: [{agent: ops, platform: slack, channel: C0OPS}, {agent: web, platform: slack, user: U1}, {agent: web, platform: Slack, channel: C0OPS}]\n",
			"bindings[2]", "bindings[0] (agent ops) has the same keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"ws", "ops", "web"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			cfg := writeFile(t, dir, "c.yaml", base+tt.bindings)
			check := refusal(t, dir, "config", "check", "-c", cfg)
			serve := refusal(t, dir, "serve", "-c", cfg)
			if !slices.Equal(check, serve) {
				t.Fatalf("config check and serve disagree:\ncheck: %q\nserve: %q", check, serve)
			}
			if len(check) != 1 || !strings.Contains(check[0], tt.key+":") || !strings.Contains(check[0], tt.msg) {
				t.Fatalf("want one line naming %s and saying %q: %q", tt.key, tt.msg, check)
			}
		})
	}
}
