package jail

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBudgetFromCaps: the tools' budget is the least room over pibot's
// cgroup and its ancestors (pids.max less pids.current, counting what
// the tools already run), less the reserve for pibot under what its
// cgroup may hold in all; levels without a limit ("max", or no file at
// the root) do not bind.
func TestBudgetFromCaps(t *testing.T) {
	type level struct{ max, current string } // "" writes no file
	tests := []struct {
		name   string
		levels []level // the mount root first, pibot's cgroup last
		inUse  int
		want   Budget
		known  bool
	}{
		{"no cap anywhere", []level{{"", ""}, {"max", "40"}}, 0, Budget{}, false},
		{"pibot's own cap", []level{{"", ""}, {"300", "20"}}, 0, Budget{Host: 300, Reserve: 75, Tools: 205}, true},
		{"counting the tools' own", []level{{"", ""}, {"300", "120"}}, 100, Budget{Host: 300, Reserve: 75, Tools: 205}, true},
		{"an ancestor with less room", []level{{"", ""}, {"1000", "900"}, {"max", "20"}}, 0, Budget{Host: 120, Reserve: 32, Tools: 68}, true},
		{"the least room binds, not the least cap", []level{{"", ""}, {"4096", "100"}, {"2048", "20"}}, 0, Budget{Host: 2048, Reserve: 256, Tools: 1772}, true},
		{"a small cap keeps 32", []level{{"", ""}, {"64", "10"}}, 0, Budget{Host: 64, Reserve: 32, Tools: 22}, true},
		{"over the cap", []level{{"", ""}, {"100", "150"}}, 0, Budget{Host: 100, Reserve: 32, Tools: 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := root
			for i, l := range tt.levels {
				if i > 0 {
					dir = filepath.Join(dir, "c")
					if err := os.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				for name, v := range map[string]string{"pids.max": l.max, "pids.current": l.current} {
					if v != "" {
						if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			got, known := pidsCap{dir: dir, root: root}.budget(tt.inUse)
			if got != tt.want || known != tt.known {
				t.Errorf("budget = %+v, %v; want %+v, %v", got, known, tt.want, tt.known)
			}
		})
	}
}
