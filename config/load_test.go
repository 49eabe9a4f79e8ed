package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "500ms", want: 500 * time.Millisecond},
		{in: "90s", want: 90 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "0", want: 0},
		{in: "90", want: 90 * time.Second},         // documented: a plain number is seconds
		{in: "1.5", want: 1500 * time.Millisecond}, // ditto
		{in: `"120"`, want: 2 * time.Minute},
		{in: "3 minutes", bad: true}, // was read as 3s
		{in: "3m ", want: 3 * time.Minute},
		{in: "10 m", bad: true},
		{in: "5 sec", bad: true},
		{in: "2h and a bit", bad: true},
		{in: "1e3", bad: true},
		{in: "Inf", bad: true},
		{in: ".inf", bad: true},
		{in: "NaN", bad: true},
		{in: "0x10", bad: true},
		{in: "99999999999999999999", bad: true},
		{in: "ten", bad: true},
		{in: "[1, 2]", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			y := "agent:\n  idle_evict: " + tt.in + "\n"
			cfg, err := Parse(strings.NewReader(y), env(nil))
			if tt.bad {
				var ce *Error
				if !errors.As(err, &ce) || ce.Key != "agent.idle_evict" || ce.Line != 2 {
					t.Fatalf("Parse(%q) = %v, want an error naming agent.idle_evict at line 2", tt.in, err)
				}
				if v := strings.Trim(tt.in, " \""); !strings.Contains(err.Error(), v) && !strings.HasPrefix(tt.in, "[") {
					t.Errorf("error %q does not quote the value %q", err, v)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := cfg.Agent.IdleEvict.D(); got != tt.want {
				t.Fatalf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestTypeErrorsNameTheKey replays bad files whose values do not fit their
// keys: the error names the dotted key and the line, not only the line.
func TestTypeErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml string
		key        string
		line       int
		msg        string
	}{
		{"int", "agent:\n  queue:\n    collect:\n      cap: abc\n", "agent.queue.collect.cap", 4, `"abc" is not a whole number`},
		{"bool", "agent:\n  compaction:\n    enabled: maybe\n", "agent.compaction.enabled", 3, "true or false"},
		{"int64 in model", "providers:\n  p:\n    api: faux\n    models:\n      - id: a\n        context_window: big\n", "providers.p.models[0].context_window", 6, "whole number"},
		{"float cost", "providers:\n  p:\n    api: faux\n    models:\n      - id: a\n        cost: {input: cheap}\n", "providers.p.models[0].cost.input", 6, "a number"},
		{"duration", "agent:\n  approvals:\n    timeout: 3 minutes\n", "agent.approvals.timeout", 3, "3 minutes"},
		{"provider timeout", "providers:\n  p:\n    api: faux\n    timeouts:\n      idle: 5 min\n", "providers.p.timeouts.idle", 5, "5 min"},
		{"size", "agent:\n  limits:\n    memory: lots\n", "agent.limits.memory", 3, "not a size"},
		{"list for string", "agent:\n  model: [a, b]\n", "agent.model", 2, "got a list"},
		{"scalar for list", "agent:\n  tools: read\n", "agent.tools", 2, "expected a list"},
		{"scalar for map", "agent:\n  approvals:\n    dm: allow\n", "agent.approvals.dm", 3, "expected a mapping"},
		{"mapping for string", "adapters:\n  web:\n    token: {a: b}\n", "adapters.web.token", 3, "got a mapping"},
		{"env-expanded", "agent:\n  retry:\n    max_retries: ${N}\n", "agent.retry.max_retries", 3, `"three"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.yaml), env(map[string]string{"N": "three"}))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse = %v, want a *config.Error", err)
			}
			if ce.Key != tt.key || ce.Line != tt.line || !strings.Contains(ce.Msg, tt.msg) {
				t.Fatalf("error = %q (key %q line %d), want key %q line %d and %q", err, ce.Key, ce.Line, tt.key, tt.line, tt.msg)
			}
			if strings.Contains(ce.Msg, "line ") {
				t.Errorf("message repeats the line: %q", ce.Msg)
			}
		})
	}
}

func TestApprovalsToolNames(t *testing.T) {
	tests := []struct {
		name  string
		group map[string]string
		key   string // "" means valid
	}{
		{"known", map[string]string{"bash": "ask", "attach": "deny", "read": "allow"}, ""},
		{"star", map[string]string{"*": "ask"}, ""},
		{"typo", map[string]string{"bahs": "ask"}, "agent.approvals.group.bahs"},
		{"case", map[string]string{"Bash": "ask"}, "agent.approvals.group.Bash"},
		{"bad policy", map[string]string{"bash": "sometimes"}, "agent.approvals.group.bash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Agent.Approvals.Group = tt.group
			err := c.Validate()
			if tt.key == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("Validate = %v, want it to name %s", err, tt.key)
			}
		})
	}
	// Through the file, the DM scope too.
	cfg, err := Parse(strings.NewReader("agent:\n  approvals:\n    dm: {wirte: ask}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "agent.approvals.dm.wirte") || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("Validate = %v, want unknown tool at agent.approvals.dm.wirte", err)
	}
}

func TestProviderTimeouts(t *testing.T) {
	y := "providers:\n  p:\n    api: openai-completions\n    timeouts: {connect: 5s, first_byte: 15m, idle: 90}\n"
	cfg, err := Parse(strings.NewReader(y), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Providers["p"].Timeouts
	if got.Connect.D() != 5*time.Second || got.FirstByte.D() != 15*time.Minute || got.Idle.D() != 90*time.Second {
		t.Fatalf("timeouts = %+v", got)
	}
	cfg.Providers["p"] = Provider{API: "openai-completions", Timeouts: ProviderTimeouts{Idle: Duration(-time.Second)}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "providers.p.timeouts.idle") {
		t.Fatalf("Validate = %v, want providers.p.timeouts.idle", err)
	}
}

func TestUnknownKeySuggestsTheNearest(t *testing.T) {
	tests := []struct{ yaml, key, msg string }{
		{"agent:\n  modle: a/b\n", "agent.modle", "did you mean agent.model?"},
		{"agnet:\n  model: a/b\n", "agnet", "did you mean agent?"},
		{"agent:\n  tool_timeout: [1, 2]\n", "agent.tool_timeout", "expected a duration like 30s, got a list"},
		{"agent:\n  zzzzzz: 1\n", "agent.zzzzzz", "unknown key"},
		{"agent:\n  skills_dirs: [x]\n", "agent.skills_dirs", "it is agent.skills now"},
	}
	for _, tt := range tests {
		_, err := Parse(strings.NewReader(tt.yaml), env(nil))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tt.key || !strings.Contains(ce.Msg, tt.msg) {
			t.Errorf("%q: %v", tt.yaml, err)
		}
		if tt.msg == "unknown key" && strings.Contains(ce.Msg, "did you mean") {
			t.Errorf("%q: a far key suggested: %q", tt.yaml, ce.Msg)
		}
	}
}
