package deps

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/pibot/pibot"

// ban lists, per package prefix (relative to the module), the imports it
// must never reach, directly or indirectly, with the reason.
var bans = []struct {
	pkg     string // package, or prefix ending in "/..."
	imports []string
	reason  string
}{
	{"llm", []string{"github.com/", mod + "/"}, "llm is the vocabulary leaf: stdlib only"},
	{"chat", []string{mod + "/gateway", mod + "/agent", mod + "/session", mod + "/providers", mod + "/tools", mod + "/adapters", "github.com/slack-go/slack", "github.com/bwmarrin/discordgo", "github.com/go-telegram/bot"}, "chat is the adapter contract: stdlib and goldmark only"},
	{"agent/...", []string{mod + "/gateway", mod + "/session", mod + "/adapters", mod + "/chat", mod + "/tools", mod + "/providers", "github.com/slack-go/slack", "github.com/bwmarrin/discordgo", "github.com/go-telegram/bot", "github.com/redis/"}, "the agent loop knows models and tools only through llm and its own interfaces"},
	{"session/...", []string{mod + "/gateway", mod + "/agent", mod + "/adapters", mod + "/chat", mod + "/tools", mod + "/providers", "github.com/slack-go/slack", "github.com/bwmarrin/discordgo", "github.com/go-telegram/bot", "github.com/redis/"}, "the session store is pure storage: no chat, no agent, no Redis"},
	{"tools/...", []string{mod + "/gateway", mod + "/agent", mod + "/session", mod + "/adapters", mod + "/chat", mod + "/providers", "github.com/slack-go/slack", "github.com/bwmarrin/discordgo", "github.com/go-telegram/bot"}, "tools implement agent.Tool structurally and know no chat"},
	{"providers/...", []string{mod + "/gateway", mod + "/agent", mod + "/session", mod + "/adapters", mod + "/chat", mod + "/tools", "github.com/slack-go/slack", "github.com/bwmarrin/discordgo", "github.com/go-telegram/bot"}, "providers speak model APIs only"},
	{"adapters/...", []string{mod + "/gateway", mod + "/agent", mod + "/session", mod + "/providers", mod + "/tools", mod + "/cluster"}, "adapters know the chat contract and their SDK only"},
	{"gateway/...", []string{"github.com/slack-go/slack", "github.com/bwmarrin/discordgo", "github.com/go-telegram/bot", mod + "/adapters", mod + "/providers", mod + "/tools"}, "the gateway never names a platform SDK, provider or tool"},
	{"cluster/...", []string{mod + "/gateway", mod + "/agent", mod + "/adapters", mod + "/chat", mod + "/providers", mod + "/tools"}, "cluster primitives are generic"},
	{"config", []string{mod + "/"}, "config is the YAML schema: stdlib and yaml only"},
}

type pkgInfo struct {
	ImportPath string
	Deps       []string
}

func listDeps(t *testing.T) []pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json", "../../...")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, out.String())
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p pkgInfo
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func matches(rel, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

func TestArrows(t *testing.T) {
	pkgs := listDeps(t)
	if len(pkgs) < 3 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	checked := 0
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		for _, b := range bans {
			if !matches(rel, b.pkg) {
				continue
			}
			checked++
			for _, d := range p.Deps {
				for _, banned := range b.imports {
					if strings.HasPrefix(d, banned) && d != p.ImportPath && !allowed(rel, d) {
						t.Errorf("%s depends on %s: %s", p.ImportPath, d, b.reason)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package matched a ban rule")
	}
}

// allowed lists the exceptions inside a ban prefix.
func allowed(rel, dep string) bool {
	switch {
	case strings.HasPrefix(rel, "chat") && strings.HasPrefix(dep, "github.com/yuin/goldmark"):
		return true
	case rel == "config" && (strings.HasPrefix(dep, "go.yaml.in/yaml") || dep == mod+"/internal/secret"):
		return true
	case strings.HasPrefix(dep, mod+"/llm") || strings.HasPrefix(dep, mod+"/internal/secret"):
		return true
	case strings.HasPrefix(rel, "chat/chattest") && strings.HasPrefix(dep, mod+"/chat"):
		return true
	}
	return false
}

// TestNoTestingInProduction keeps test scaffolding out of the binary.
func TestNoTestingInProduction(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "../../cmd/pibot")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list cmd/pibot: %v\n%s", err, out)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == "testing" || strings.HasPrefix(d, mod) && strings.HasSuffix(d, "test") {
			t.Errorf("cmd/pibot depends on %s: test code must not reach the binary", d)
		}
	}
}
