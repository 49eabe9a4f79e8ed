package skills

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func names(ss []Skill) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestLoadFollowsPiDiscovery(t *testing.T) {
	f := newFixture(t)
	got, diags := Load(f.sources())
	want := []string{"alpha", "global", "BadName", "beta-tool", "crlf", "inner", "hidden", "top", "extra-one"}
	if !slices.Equal(names(got), want) {
		t.Errorf("skills %q, want %q", names(got), want)
	}
	if got[0].Description != "Global alpha wins." {
		t.Errorf("alpha from %s: the agent dir's must win", got[0].FilePath)
	}
	skipped := map[string]bool{}
	for _, d := range diags {
		if d.Skipped {
			skipped[filepath.Base(filepath.Dir(d.Path))] = true
		}
		if !strings.Contains(d.String(), d.Path) {
			t.Errorf("diagnostic %q does not name its file", d)
		}
	}
	for _, s := range []string{"nodesc", "broken", "alpha"} {
		if !skipped[s] {
			t.Errorf("%s not reported as skipped: %v", s, diags)
		}
	}
}

func TestBlockIsPisText(t *testing.T) {
	skills := []Skill{
		{Name: "a", Description: `x <y> & "z" 'w'`, FilePath: "/s/a/SKILL.md"},
		{Name: "h", Description: "hidden", FilePath: "/s/h/SKILL.md", Hidden: true},
	}
	want := "\n\nThe following skills provide specialized instructions for specific tasks.\n" +
		"Use the read tool to load a skill's file when the task matches its description.\n" +
		"When a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.\n" +
		"\n<available_skills>\n  <skill>\n    <name>a</name>\n" +
		"    <description>x &lt;y&gt; &amp; &quot;z&quot; &apos;w&apos;</description>\n" +
		"    <location>/s/a/SKILL.md</location>\n  </skill>\n</available_skills>"
	if got := Block(skills); got != want {
		t.Errorf("block\n%q\nwant\n%q", got, want)
	}
	if got := Block(skills[1:]); got != "" {
		t.Errorf("only hidden skills: %q, want none", got)
	}
}

func TestExpandSkill(t *testing.T) {
	f := newFixture(t)
	skills, _ := Load(f.sources())
	path := filepath.Join(f.ws, ".pi", "skills", "crlf", "SKILL.md")
	tests := []struct{ in, want string }{
		{"/skill:crlf", "<skill name=\"crlf\" location=\"" + path + "\">\nReferences are relative to " + filepath.Dir(path) + ".\n\nLine one.\nLine two.\n</skill>"},
		{"/skill:crlf  do it ", "<skill name=\"crlf\" location=\"" + path + "\">\nReferences are relative to " + filepath.Dir(path) + ".\n\nLine one.\nLine two.\n</skill>\n\ndo it"},
		{"/skill:nope x", "/skill:nope x"},
		{"skill:crlf", "skill:crlf"},
	}
	for _, tt := range tests {
		got, _, err := ExpandSkill(tt.in, skills)
		if err != nil || got != tt.want {
			t.Errorf("ExpandSkill(%q) = %q, %v\nwant %q", tt.in, got, err, tt.want)
		}
	}
}

func TestExpandSkillFileGone(t *testing.T) {
	_, ok, err := ExpandSkill("/skill:x", []Skill{{Name: "x", FilePath: filepath.Join(t.TempDir(), "gone.md")}})
	if err == nil || ok {
		t.Errorf("ok %v err %v: a vanished skill file must be an error", ok, err)
	}
}

// A skill whose file changed since it was loaded is not expanded: what
// was loaded (and checked) is what expands.
func TestExpandSkillChangedSinceLoaded(t *testing.T) {
	f := newFixture(t)
	skills, _ := Load(f.sources())
	write(t, filepath.Join(f.ws, ".pi", "skills", "crlf", "SKILL.md"), "---\ndescription: swapped\n---\nSwapped body.\n")
	if out, ok, err := ExpandSkill("/skill:crlf", skills); err == nil || ok || out != "/skill:crlf" {
		t.Errorf("ExpandSkill = %q, %v, %v: a changed file must be an error", out, ok, err)
	}
}

// A prompt folder that cannot be read is reported.
func TestTemplatesMissingFolder(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, diags := LoadTemplates(Sources{Prompts: []string{missing}})
	if len(diags) != 1 || diags[0].Path != missing || !diags[0].Skipped {
		t.Errorf("diagnostics %v", diags)
	}
}

func TestTemplates(t *testing.T) {
	f := newFixture(t)
	ts, _ := LoadTemplates(f.sources())
	var got []string
	for _, t := range ts {
		got = append(got, t.Name+"|"+t.Description+"|"+t.ArgumentHint)
	}
	want := []string{"hello|Say hello|", "review|Global review of $1|",
		"args|one=$1 two=$2 ten=$10 zero=$0 all=$@ args=$ARGUMENTS s2=${@:...|",
		"fix|Fix the following issue which is described in far more than ...|", "review|Review a file|FILE"}
	if !slices.Equal(got, want) {
		t.Errorf("templates\n%q\nwant\n%q", got, want)
	}
}

func TestSubstitute(t *testing.T) {
	tests := []struct {
		content string
		args    []string
		want    string
	}{
		{"$1-$2-$3", []string{"a", "b"}, "a-b-"},
		{"$@|$ARGUMENTS", []string{"a", "b"}, "a b|a b"},
		{"${@:2}|${@:2:1}|${@:0}|${@:5}", []string{"a", "b", "c"}, "b c|b|a b c|"},
		{"$1 $@", []string{"$@", "b"}, "$@ b $@ b"}, // $1's value "$@" is substituted again by the $@ step, as in pi
		{"x $@ y", []string{"$&"}, "x $@ y"},
		{"x $@ y", []string{"$$"}, "x $ y"},
		{"x $@ y", []string{"$'"}, "x  y y"},
	}
	for _, tt := range tests {
		if got := Substitute(tt.content, tt.args); got != tt.want {
			t.Errorf("Substitute(%q, %q) = %q, want %q", tt.content, tt.args, got, tt.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a  b\tc", []string{"a", "b", "c"}},
		{`"a b" 'c d' e"f g"h`, []string{"a b", "c d", "ef gh"}},
		{`"unclosed x`, []string{"unclosed x"}},
	}
	for _, tt := range tests {
		if got := ParseArgs(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
