package config

import (
	"strings"
	"testing"
)

func TestWorkspaceOnlyParse(t *testing.T) {
	for _, c := range []struct {
		yaml                string
		everyone, nonOwners bool
		wantErr             string
	}{
		{"agent: {}", false, true, ""},
		{"agent: {workspace_only: non_owners}", false, true, ""},
		{"agent: {workspace_only: true}", true, true, ""},
		{"agent: {workspace_only: false}", false, false, ""},
		{"agent:\n  workspace_only: owners", false, false, `agent.workspace_only (line 2): "owners" is not true, false or non_owners`},
	} {
		cfg, err := Parse(strings.NewReader(c.yaml), func(string) string { return "" })
		if err == nil {
			err = cfg.Validate()
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.yaml, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.yaml, err)
			continue
		}
		if w := cfg.Agent.WorkspaceOnly; w.Everyone() != c.everyone || w.NonOwners() != c.nonOwners {
			t.Errorf("%s: %q everyone=%v non-owners=%v", c.yaml, w, w.Everyone(), w.NonOwners())
		}
	}
}
