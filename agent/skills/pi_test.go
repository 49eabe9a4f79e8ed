package skills

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// piScript loads the fixture with pi 0.73.1's own loaders and expands the
// inputs with its own functions (AgentSession's skill expansion called on
// a stand-in holding the loaded skills, then expandPromptTemplate).
const piScript = `
const base = process.env.PI_DIR + "/node_modules/@mariozechner/pi-coding-agent/dist/core/";
const { loadSkills, formatSkillsForPrompt } = await import(base + "skills.js");
const { loadPromptTemplates, expandPromptTemplate } = await import(base + "prompt-templates.js");
const { AgentSession } = await import(base + "agent-session.js");
const [ws, agentDir, extra, inputs] = process.argv.slice(2);
const { skills } = loadSkills({ cwd: ws, agentDir, skillPaths: [extra], includeDefaults: true });
const templates = loadPromptTemplates({ cwd: ws, agentDir, promptPaths: [], includeDefaults: true });
const self = { resourceLoader: { getSkills: () => ({ skills }) }, _extensionRunner: { emitError() {} } };
const expand = (t) => expandPromptTemplate(AgentSession.prototype._expandSkillCommand.call(self, t), templates);
console.log(JSON.stringify({
	block: formatSkillsForPrompt(skills),
	skills: skills.map((s) => s.name),
	templates: templates.map((t) => t.name + "|" + t.description + "|" + (t.argumentHint ?? "")),
	expanded: JSON.parse(inputs).map(expand),
}));
`

// piDir is where compat/pi-check.sh installs pi; "" when it is not there.
func piDir() string {
	cache := os.Getenv("PIBOT_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "pibot")
	}
	dir := filepath.Join(cache, "pi-0.73.1")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@mariozechner", "pi-coding-agent", "package.json")); err != nil {
		return ""
	}
	return dir
}

// The skills block, the skills and templates found and every expansion
// equal pi 0.73.1's for the same files. Skipped until compat/pi-check.sh
// has installed pi.
func TestSameAsPi(t *testing.T) {
	pi := piDir()
	node, err := exec.LookPath("node")
	if pi == "" || err != nil {
		t.Skip("pi is not installed (run compat/pi-check.sh once) or node is missing")
	}
	f := newFixture(t)
	script := filepath.Join(t.TempDir(), "pi.mjs")
	if err := os.WriteFile(script, []byte(piScript), 0o600); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(inputs)
	cmd := exec.Command(node, script, f.ws, f.agentDir, f.extra, string(in))
	cmd.Env = append(os.Environ(), "PI_DIR="+pi, "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pi: %v\n%s", err, out)
	}
	var want struct {
		Block     string   `json:"block"`
		Skills    []string `json:"skills"`
		Templates []string `json:"templates"`
		Expanded  []string `json:"expanded"`
	}
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("pi's answer %q: %v", out, err)
	}
	skills, _ := Load(f.sources())
	if got := names(skills); !slices.Equal(got, want.Skills) {
		t.Errorf("skills %q, pi %q", got, want.Skills)
	}
	if got := Block(skills); got != want.Block {
		t.Errorf("block\n%s\npi\n%s", got, want.Block)
	}
	templates, _ := LoadTemplates(f.sources())
	var tn []string
	for _, t := range templates {
		tn = append(tn, t.Name+"|"+t.Description+"|"+t.ArgumentHint)
	}
	if !slices.Equal(tn, want.Templates) {
		t.Errorf("templates %q, pi %q", tn, want.Templates)
	}
	for i, text := range inputs {
		got, err := Expand(text, skills, templates)
		if err != nil || got != want.Expanded[i] {
			t.Errorf("Expand(%q) = %q, %v\npi %q", text, got, err, want.Expanded[i])
		}
	}
}
