package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Limits of the Agent Skills convention.
const (
	maxNameLen        = 64
	maxDescriptionLen = 1024
)

// skillNameRE is the character set of a skill name.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var skillNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9-]+$`) })

// Skill is one loaded skill.
type Skill struct {
	// Name is the front matter's name, or the folder's name.
	Name        string
	Description string
	// FilePath is the skill's markdown file, BaseDir its folder.
	FilePath string
	BaseDir  string
	// Hidden skills (disable-model-invocation: true) are not listed in
	// the system prompt; /skill:NAME still expands them.
	Hidden bool
	// Body is the text after the front matter; SHA256 the hex SHA-256 of
	// the whole file as it was read.
	Body   string
	SHA256 string
}

// Diagnostic is a problem with one file. Skipped tells whether the file
// was left out (a warning about a name still loads the skill, as in pi).
type Diagnostic struct {
	Path    string
	Message string
	Skipped bool
}

// String formats d for a log line.
func (d Diagnostic) String() string { return d.Path + ": " + d.Message }

// Sources are where skills and prompt templates are found, in order.
type Sources struct {
	// Skills are skill folders or SKILL.md files; "~" is the home
	// directory. pi's order is ~/.pi/agent/skills, <workspace>/.pi/skills,
	// then its skill paths.
	Skills []string
	// Prompts are prompt template folders (pi's order:
	// ~/.pi/agent/prompts, then <workspace>/.pi/prompts).
	Prompts []string
}

// Load returns the skills of src.Skills in order. A name found twice
// keeps the first skill; the same file reached twice (through a symlink)
// counts once.
func Load(src Sources) ([]Skill, []Diagnostic) {
	var l loader
	for _, raw := range src.Skills {
		p := resolvePath(raw)
		st, err := os.Stat(p)
		switch {
		case err != nil:
			l.diags = append(l.diags, Diagnostic{Path: p, Message: "skill path does not exist", Skipped: true})
		case st.IsDir():
			l.add(loadDir(p, true))
		case st.Mode().IsRegular() && strings.HasSuffix(p, ".md"):
			s, d := loadSkill(p)
			var ss []Skill
			if s != nil {
				ss = append(ss, *s)
			}
			l.add(ss, d)
		default:
			l.diags = append(l.diags, Diagnostic{Path: p, Message: "skill path is not a markdown file", Skipped: true})
		}
	}
	return l.skills, append(l.diags, l.collisions...)
}

// loader collects skills, dropping duplicates.
type loader struct {
	skills     []Skill
	diags      []Diagnostic
	collisions []Diagnostic
	real       map[string]bool
}

func (l *loader) add(ss []Skill, diags []Diagnostic) {
	l.diags = append(l.diags, diags...)
	if l.real == nil {
		l.real = map[string]bool{}
	}
	for _, s := range ss {
		real, err := filepath.EvalSymlinks(s.FilePath)
		if err != nil {
			real = s.FilePath
		}
		if l.real[real] {
			continue
		}
		if i := l.index(s.Name); i >= 0 {
			l.collisions = append(l.collisions, Diagnostic{Path: s.FilePath, Skipped: true,
				Message: fmt.Sprintf("name %q collision (%s is used)", s.Name, l.skills[i].FilePath)})
			continue
		}
		l.skills = append(l.skills, s)
		l.real[real] = true
	}
}

func (l *loader) index(name string) int {
	for i, s := range l.skills {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// loadDir finds skills under dir: a folder holding SKILL.md is a skill
// and is not searched further; otherwise the direct .md files of the
// top folder are skills too, and subfolders (not hidden, not
// node_modules) are searched. Symlinks are followed.
func loadDir(dir string, root bool) ([]Skill, []Diagnostic) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		if e.Name() != "SKILL.md" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		s, d := loadSkill(p)
		if s == nil {
			return nil, d
		}
		return []Skill{*s}, d
	}
	var skills []Skill
	var diags []Diagnostic
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || name == "node_modules" {
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p) // follows symlinks; a broken one is skipped
		if err != nil {
			continue
		}
		if st.IsDir() {
			s, d := loadDir(p, false)
			skills, diags = append(skills, s...), append(diags, d...)
			continue
		}
		if !st.Mode().IsRegular() || !root || !strings.HasSuffix(name, ".md") {
			continue
		}
		s, d := loadSkill(p)
		if s != nil {
			skills = append(skills, *s)
		}
		diags = append(diags, d...)
	}
	return skills, diags
}

// loadSkill reads one skill file. It returns nil when the file cannot be
// used (unreadable, invalid front matter, no description); a name that
// breaks the convention is only a warning.
func loadSkill(path string) (*Skill, []Diagnostic) {
	skip := func(msg string) (*Skill, []Diagnostic) {
		return nil, []Diagnostic{{Path: path, Message: msg, Skipped: true}}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return skip(err.Error())
	}
	fm, body, err := parseFrontmatter(string(data))
	if err != nil {
		return skip(err.Error())
	}
	desc, ok := stringField(fm, "description")
	if !ok {
		return skip("description is not a string")
	}
	if jsTrim(desc) == "" {
		return skip("description is required")
	}
	dir := filepath.Dir(path)
	parent := filepath.Base(dir)
	name, ok := stringField(fm, "name")
	if !ok {
		return skip("name is not a string")
	}
	if name == "" {
		name = parent
	}
	var warn []string
	if n := len([]rune(desc)); n > maxDescriptionLen {
		warn = append(warn, fmt.Sprintf("description exceeds %d characters (%d)", maxDescriptionLen, n))
	}
	warn = append(warn, nameProblems(name, parent)...)
	var diags []Diagnostic
	if len(warn) > 0 {
		diags = []Diagnostic{{Path: path, Message: strings.Join(warn, "; ")}}
	}
	hidden, _ := fm["disable-model-invocation"].(bool)
	return &Skill{Name: name, Description: desc, FilePath: path, BaseDir: dir, Hidden: hidden, Body: body, SHA256: hexSHA256(data)}, diags
}

// nameProblems checks a name against the Agent Skills convention.
func nameProblems(name, parent string) []string {
	var errs []string
	if name != parent {
		errs = append(errs, fmt.Sprintf("name %q does not match parent directory %q", name, parent))
	}
	if n := len([]rune(name)); n > maxNameLen {
		errs = append(errs, fmt.Sprintf("name exceeds %d characters (%d)", maxNameLen, n))
	}
	if !skillNameRE().MatchString(name) {
		errs = append(errs, "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)")
	}
	if strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") {
		errs = append(errs, "name must not start or end with a hyphen")
	}
	if strings.Contains(name, "--") {
		errs = append(errs, "name must not contain consecutive hyphens")
	}
	return errs
}

// resolvePath expands a leading "~" to the home directory.
func resolvePath(p string) string {
	p = strings.TrimSpace(p)
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[1:])
		}
	}
	return filepath.Clean(p)
}

// hexSHA256 is the hex SHA-256 of data.
func hexSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Block returns the system prompt's skills section exactly as pi writes
// it (formatSkillsForPrompt), or "" when no skill is listed. It starts
// with two newlines, to follow the text before it. pi adds it only when
// the read tool is active.
func Block(skills []Skill) string {
	var b strings.Builder
	n := 0
	for _, s := range skills {
		if s.Hidden {
			continue
		}
		if n == 0 {
			b.WriteString("\n\nThe following skills provide specialized instructions for specific tasks.\n" +
				"Use the read tool to load a skill's file when the task matches its description.\n" +
				"When a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.\n" +
				"\n<available_skills>")
		}
		n++
		fmt.Fprintf(&b, "\n  <skill>\n    <name>%s</name>\n    <description>%s</description>\n    <location>%s</location>\n  </skill>",
			escapeXML(s.Name), escapeXML(s.Description), escapeXML(s.FilePath))
	}
	if n == 0 {
		return ""
	}
	b.WriteString("\n</available_skills>")
	return b.String()
}

// xmlEscaper escapes as pi's escapeXml.
var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

func escapeXML(s string) string { return xmlEscaper.Replace(s) }

// ExpandSkill expands "/skill:NAME args" as pi does: the skill's body in
// a <skill> element, then the arguments after a blank line. Text that is
// no skill command, or names an unknown skill, comes back unchanged;
// ok tells whether it was expanded. A skill file that cannot be read any
// more, or whose content is no longer the one loaded (SHA256), is an
// error.
func ExpandSkill(text string, skills []Skill) (out string, ok bool, err error) {
	const prefix = "/skill:"
	if !strings.HasPrefix(text, prefix) {
		return text, false, nil
	}
	name, args, _ := strings.Cut(text[len(prefix):], " ")
	args = jsTrim(args)
	var s *Skill
	for i := range skills {
		if skills[i].Name == name {
			s = &skills[i]
			break
		}
	}
	if s == nil {
		return text, false, nil
	}
	data, err := os.ReadFile(s.FilePath)
	if err != nil {
		return text, false, fmt.Errorf("skills: expand %s: %w", name, err)
	}
	if s.SHA256 != "" && hexSHA256(data) != s.SHA256 {
		return text, false, fmt.Errorf("skills: expand %s: %s changed since it was loaded", name, s.FilePath)
	}
	_, body, err := parseFrontmatter(string(data))
	if err != nil {
		return text, false, fmt.Errorf("skills: expand %s: %s: %w", name, s.FilePath, err)
	}
	block := fmt.Sprintf("<skill name=\"%s\" location=\"%s\">\nReferences are relative to %s.\n\n%s\n</skill>",
		s.Name, s.FilePath, s.BaseDir, jsTrim(body))
	if args != "" {
		block += "\n\n" + args
	}
	return block, true, nil
}
