package binding_test

import (
	"reflect"
	"testing"

	"github.com/pibot/pibot/gateway/binding"
)

func ptr(b bool) *bool { return &b }

// pinned are the bindings of the issue that introduced them.
var pinned = []binding.Rule{
	{Agent: "ops", Platform: "slack", Channel: "C0OPS"},
	{Agent: "web", Platform: "slack", Workspace: "T0TEAM", Channel: "C0WEB"},
	{Agent: "ops", Platform: "telegram", User: "123456"},
	{Agent: "web", Platform: "discord", Workspace: "987", Role: "555"},
}

func TestResolve(t *testing.T) {
	rules := append(append([]binding.Rule{}, pinned...),
		binding.Rule{Agent: "personal", Platform: "slack", DM: ptr(true)},
		binding.Rule{Agent: "night", Platform: "slack", Channel: "C0OPS", User: "U0BOSS"},
		binding.Rule{Agent: "first", Platform: "discord", Channel: "D1"},
		binding.Rule{Agent: "second", Platform: "discord", Channel: "D1"},
		binding.Rule{Agent: "anyslack", Platform: "SLACK"},
	)
	tests := []struct {
		name  string
		place binding.Place
		agent string
		rule  int
	}{
		{"channel binding", binding.Place{Platform: "slack", Workspace: "T0TEAM", Channel: "C0OPS", User: "U1"}, "ops", 0},
		{"workspace and channel", binding.Place{Platform: "slack", Workspace: "T0TEAM", Channel: "C0WEB", User: "U1"}, "web", 1},
		{"workspace must match", binding.Place{Platform: "slack", Workspace: "T0OTHER", Channel: "C0WEB", User: "U1"}, "anyslack", 8},
		{"user beats channel", binding.Place{Platform: "slack", Workspace: "T0TEAM", Channel: "C0OPS", User: "U0BOSS"}, "night", 5},
		{"dm beats platform", binding.Place{Platform: "slack", Workspace: "T0TEAM", Channel: "D0X", DM: true, User: "U1"}, "personal", 4},
		{"telegram user", binding.Place{Platform: "telegram", Channel: "123456", DM: true, User: "123456"}, "ops", 2},
		{"telegram other user: default", binding.Place{Platform: "telegram", Channel: "42", DM: true, User: "42"}, binding.Default, -1},
		{"discord role", binding.Place{Platform: "discord", Workspace: "987", Channel: "C9", User: "u", Roles: []string{"1", "555"}}, "web", 3},
		{"discord without role: default", binding.Place{Platform: "discord", Workspace: "987", Channel: "C9", User: "u", Roles: []string{"1"}}, binding.Default, -1},
		{"tie: the earlier", binding.Place{Platform: "discord", Workspace: "1", Channel: "D1", User: "u"}, "first", 6},
		{"channel beats role", binding.Place{Platform: "discord", Workspace: "987", Channel: "D1", User: "u", Roles: []string{"555"}}, "first", 6},
		{"platform case-insensitive", binding.Place{Platform: "slack", Channel: "C7"}, "anyslack", 8},
		{"web chat: default", binding.Place{Platform: "web", Channel: "w1", DM: true, User: "owner"}, binding.Default, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := binding.Resolve(rules, tt.place)
			if got.Agent != tt.agent || got.Rule != tt.rule {
				t.Fatalf("Resolve = %q (rule %d, %s), want %q (rule %d)", got.Agent, got.Rule, got.Why, tt.agent, tt.rule)
			}
			if got.Why == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestResolveWhy(t *testing.T) {
	got := binding.Resolve(pinned, binding.Place{Platform: "slack", Workspace: "T0TEAM", Channel: "C0WEB"})
	if want := "bindings[1]: platform=slack workspace=T0TEAM channel=C0WEB"; got.Why != want {
		t.Fatalf("Why = %q, want %q", got.Why, want)
	}
	if got := binding.Resolve(nil, binding.Place{Platform: "slack"}); got.Agent != binding.Default || got.Rule != -1 {
		t.Fatalf("no rules: %+v", got)
	}
}

func TestShadowed(t *testing.T) {
	tests := []struct {
		name  string
		rules []binding.Rule
		want  []binding.Shadow
	}{
		{"pinned: none", pinned, nil},
		{"same keys, other agent", []binding.Rule{
			{Agent: "ops", Platform: "slack", Channel: "C0OPS"},
			{Agent: "web", Platform: "Slack", Channel: "C0OPS"},
		}, []binding.Shadow{{Rule: 1, By: 0}}},
		{"more specific later rule is not shadowed", []binding.Rule{
			{Agent: "ops", Platform: "slack"},
			{Agent: "web", Platform: "slack", Channel: "C0OPS"},
		}, nil},
		{"less specific later rule is not shadowed", []binding.Rule{
			{Agent: "web", Platform: "slack", Channel: "C0OPS"},
			{Agent: "ops", Platform: "slack"},
		}, nil},
		{"dm values differ", []binding.Rule{
			{Agent: "a", Platform: "slack", DM: ptr(true)},
			{Agent: "b", Platform: "slack", DM: ptr(false)},
		}, nil},
		{"empty rule twice", []binding.Rule{{Agent: "a"}, {Agent: "b"}, {Agent: "c", User: "u"}, {Agent: "d", User: "u"}},
			[]binding.Shadow{{Rule: 1, By: 0}, {Rule: 3, By: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := binding.Shadowed(tt.rules); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Shadowed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	r := binding.Rule{Agent: "x", Platform: "discord", Workspace: "987", DM: ptr(false), Role: "555"}
	if got, want := r.Keys(), "platform=discord workspace=987 dm=false role=555"; got != want {
		t.Fatalf("Keys = %q, want %q", got, want)
	}
	if got := (binding.Rule{Agent: "x"}).Keys(); got != "(no keys)" {
		t.Fatalf("Keys of an empty rule = %q", got)
	}
}
