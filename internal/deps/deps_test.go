package deps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/pibot/pibot"

// pkgInfo is the part of `go list -json` the rules need.
type pkgInfo struct {
	ImportPath   string
	Name         string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

// graph is the module as the go command sees it.
type graph struct {
	pkgs    map[string]*pkgInfo // by module-relative path
	require []string            // third-party modules in go.mod
}

// load lists every package of the module and the modules go.mod requires.
func load(t *testing.T) graph {
	t.Helper()
	out := goCmd(t, "list", "-json", "./...")
	g := graph{pkgs: map[string]*pkgInfo{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkgInfo
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		r, ok := rel(p.ImportPath)
		if !ok {
			t.Fatalf("go list ./... returned %s, outside the module", p.ImportPath)
		}
		g.pkgs[r] = &p
	}
	var gomod struct{ Require []struct{ Path string } }
	if err := json.Unmarshal(goCmd(t, "mod", "edit", "-json"), &gomod); err != nil {
		t.Fatalf("decode go.mod: %v", err)
	}
	for _, r := range gomod.Require {
		g.require = append(g.require, r.Path)
	}
	if len(g.pkgs) < 10 || len(g.require) == 0 {
		t.Fatalf("go list found only %d packages and %d modules", len(g.pkgs), len(g.require))
	}
	return g
}

// goCmd runs the go command at the module root.
func goCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

// rel returns the module-relative path of a module package.
func rel(importPath string) (string, bool) {
	if importPath == mod {
		return ".", true
	}
	r, ok := strings.CutPrefix(importPath, mod+"/")
	return r, ok
}

// show names a package the way the rules do.
func show(importPath string) string {
	if r, ok := rel(importPath); ok {
		return r
	}
	return importPath
}

// thirdParty reports whether a rule entry is a third-party module path.
func thirdParty(entry string) bool {
	first, _, _ := strings.Cut(entry, "/")
	return strings.Contains(first, ".")
}

// stdlib reports whether an import path belongs to the standard library.
func stdlib(importPath string) bool {
	first, _, _ := strings.Cut(importPath, "/")
	return !strings.Contains(first, ".")
}

// matches reports whether a rule entry covers an import path.
func matches(entry, importPath string) bool {
	if thirdParty(entry) {
		return importPath == entry || strings.HasPrefix(importPath, entry+"/")
	}
	r, ok := rel(importPath)
	if !ok {
		return false
	}
	if base, ok := strings.CutSuffix(entry, "/..."); ok {
		return r == base || strings.HasPrefix(r, base+"/")
	}
	return r == entry
}

// anyMatch reports whether one of entries covers importPath.
func anyMatch(entries []string, importPath string) bool {
	return slices.ContainsFunc(entries, func(e string) bool { return matches(e, importPath) })
}

// check returns every violation of rules in g, sorted.
func check(rules []rule, g graph) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	byPkg := map[string]*rule{}
	for i := range rules {
		r := &rules[i]
		if byPkg[r.pkg] != nil {
			fail("%s has two rules", r.pkg)
		}
		byPkg[r.pkg] = r
		checkRule(r, g, fail)
	}
	testOnly := func(importPath string) bool {
		r, ok := rel(importPath)
		return ok && byPkg[r] != nil && byPkg[r].testOnly
	}
	for name, p := range g.pkgs {
		r := byPkg[name]
		if r == nil {
			fail("%s has no rule: add one to internal/deps/rules_test.go, listing what it may import", name)
			continue
		}
		for _, imp := range p.Imports {
			switch {
			case imp == p.ImportPath:
			case imp == "testing" && !r.testOnly:
				fail("%s imports testing but its rule is not test-only: %s", name, r.why)
			case stdlib(imp):
			case !anyMatch(r.may, imp):
				fail("%s imports %s, which its rule does not allow: %s", name, show(imp), r.why)
			case testOnly(imp) && !r.testOnly:
				fail("%s imports test support %s: %s", name, show(imp), r.why)
			}
		}
		for _, imp := range join(p.TestImports, p.XTestImports) {
			if imp == p.ImportPath || stdlib(imp) || anyMatch(r.may, imp) || anyMatch(r.test, imp) ||
				testOnly(imp) && (path.Dir(imp) == p.ImportPath || anyMatch(r.may, path.Dir(imp))) {
				continue
			}
			fail("%s's tests import %s, which its rule does not allow: %s", name, show(imp), r.why)
		}
		for _, d := range p.Deps {
			if anyMatch(r.never, d) {
				fail("%s reaches %s (%s), which its rule forbids: %s", name, show(d), chain(g, name, d), r.why)
			}
			if p.Name == "main" && !r.testOnly && (d == "testing" || strings.HasPrefix(d, "testing/") || testOnly(d)) {
				fail("%s reaches %s (%s): test code must not reach a command", name, show(d), chain(g, name, d))
			}
		}
	}
	slices.Sort(errs)
	return errs
}

// checkRule fails a rule that names a package which does not exist, a
// third-party module go.mod does not require, or a test support package
// not marked as such.
func checkRule(r *rule, g graph, fail func(string, ...any)) {
	if g.pkgs[r.pkg] == nil {
		fail("rule for %s: no such package (renamed or removed? fix the rule)", r.pkg)
	} else if strings.HasSuffix(path.Base(r.pkg), "test") && !r.testOnly {
		fail("rule for %s: a test support package must be marked testOnly", r.pkg)
	}
	for _, e := range join(r.may, r.test, r.never) {
		if thirdParty(e) {
			continue
		}
		found := false
		for _, p := range g.pkgs {
			if matches(e, p.ImportPath) {
				found = true
				break
			}
		}
		if !found {
			fail("rule for %s names %s, which is no package of the module (renamed or removed? fix the rule)", r.pkg, e)
		}
	}
	for _, e := range join(r.may, r.test) {
		if thirdParty(e) && !slices.ContainsFunc(g.require, func(m string) bool {
			return e == m || strings.HasPrefix(e, m+"/") || strings.HasPrefix(m, e+"/")
		}) {
			fail("rule for %s allows %s, which go.mod does not require", r.pkg, e)
		}
	}
}

// chain returns the shortest import chain inside the module from the
// package named from to a package that imports dep directly.
func chain(g graph, from, dep string) string {
	type step struct {
		name string
		prev *step
	}
	seen := map[string]bool{from: true}
	queue := []*step{{name: from}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		p := g.pkgs[s.name]
		if p == nil {
			continue
		}
		if slices.Contains(p.Imports, dep) {
			parts := []string{show(dep)}
			for x := s; x != nil; x = x.prev {
				parts = append(parts, x.name)
			}
			slices.Reverse(parts)
			return strings.Join(parts, " → ")
		}
		for _, imp := range p.Imports {
			if r, ok := rel(imp); ok && !seen[r] {
				seen[r] = true
				queue = append(queue, &step{name: r, prev: s})
			}
		}
	}
	return "through a third-party module"
}

// clone copies g deeply enough to change imports.
func (g graph) clone() graph {
	c := graph{pkgs: map[string]*pkgInfo{}, require: slices.Clone(g.require)}
	for k, p := range g.pkgs {
		q := *p
		q.Imports = slices.Clone(p.Imports)
		q.TestImports = slices.Clone(p.TestImports)
		q.XTestImports = slices.Clone(p.XTestImports)
		q.Deps = slices.Clone(p.Deps)
		c.pkgs[k] = &q
	}
	return c
}

// full turns a rule entry naming a module package into its import path.
func full(entry string) string {
	if thirdParty(entry) || entry == "testing" {
		return entry
	}
	return mod + "/" + entry
}

// addImport makes from import to directly (and so depend on it).
func (g graph) addImport(from, to string) {
	p := g.pkgs[from]
	p.Imports = append(p.Imports, full(to))
	p.Deps = append(p.Deps, full(to))
}

// TestArrows checks the module against the allow-list, and checks that the
// checker catches the arrows it exists to forbid.
func TestArrows(t *testing.T) {
	g := load(t)
	base := check(rules, g)
	for _, e := range base {
		t.Error(e)
	}

	tests := []struct {
		name   string
		change func(g graph)
		want   []string // substrings of violations; none for an allowed change
	}{
		{"agent imports gateway", func(g graph) { g.addImport("agent", "gateway") },
			[]string{"agent imports gateway, which its rule does not allow: the agent loop", "agent reaches gateway (agent → gateway)"}},
		{"adapter imports session", func(g graph) { g.addImport("adapters/telegram", "session") },
			[]string{"adapters/telegram imports session, which its rule does not allow: adapters know"}},
		{"adapter reaches session through chat", func(g graph) {
			g.addImport("chat", "session")
			g.pkgs["adapters/web"].Deps = append(g.pkgs["adapters/web"].Deps, mod+"/session")
		},
			[]string{"chat imports session", "adapters/web reaches session (adapters/web → chat → session)"}},
		{"chat imports an SDK", func(g graph) { g.addImport("chat", slackSDK) },
			[]string{"chat imports github.com/slack-go/slack, which its rule does not allow: chat is the adapter contract", "chat reaches github.com/slack-go/slack"}},
		{"chat reaches an SDK through goldmark", func(g graph) { g.pkgs["chat"].Deps = append(g.pkgs["chat"].Deps, discordSDK) },
			[]string{"chat reaches github.com/bwmarrin/discordgo (through a third-party module)"}},
		{"gateway imports a provider", func(g graph) { g.addImport("gateway", "providers/faux") },
			[]string{"gateway imports providers/faux, which its rule does not allow"}},
		{"new package without a rule", func(g graph) {
			g.pkgs["gateway/router"] = &pkgInfo{ImportPath: mod + "/gateway/router", Imports: []string{mod + "/chat"}}
		}, []string{"gateway/router has no rule"}},
		{"removed package", func(g graph) { delete(g.pkgs, "tools/sandbox") },
			[]string{"rule for tools/sandbox: no such package", "rule for tools names tools/sandbox, which is no package"}},
		{"dropped module", func(g graph) {
			g.require = slices.DeleteFunc(g.require, func(m string) bool { return m == goldmark })
		}, []string{"rule for chat allows github.com/yuin/goldmark, which go.mod does not require"}},
		{"production imports test support", func(g graph) { g.addImport("cmd/pibot", "agent/agenttest") },
			[]string{"cmd/pibot imports test support agent/agenttest", "cmd/pibot reaches agent/agenttest (cmd/pibot → agent/agenttest): test code must not reach a command"}},
		{"production package imports testing", func(g graph) { g.addImport("session", "testing") },
			[]string{"session imports testing but its rule is not test-only"}},
		{"command reaches testing", func(g graph) { g.pkgs["cmd/pibot"].Deps = append(g.pkgs["cmd/pibot"].Deps, "testing") },
			[]string{"cmd/pibot reaches testing"}},
		{"agent's tests import gateway", func(g graph) { g.pkgs["agent"].TestImports = append(g.pkgs["agent"].TestImports, mod+"/gateway") },
			[]string{"agent's tests import gateway, which its rule does not allow"}},
		{"adapter's tests import the gateway", func(g graph) {
			g.pkgs["adapters/web"].XTestImports = append(g.pkgs["adapters/web"].XTestImports, mod+"/gateway")
		}, []string{"adapters/web's tests import gateway"}},
		{"tests may use the fakes of what the package may import", func(g graph) {
			g.pkgs["gateway"].TestImports = append(g.pkgs["gateway"].TestImports, mod+"/session/sessiontest", mod+"/chat/chattest")
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := g.clone()
			tc.change(c)
			errs := check(rules, c)
			got := strings.Join(errs, "\n")
			if added := slices.DeleteFunc(errs, func(e string) bool { return slices.Contains(base, e) }); len(tc.want) == 0 && len(added) > 0 {
				t.Errorf("allowed change reported:\n%s", strings.Join(added, "\n"))
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
		})
	}
}
