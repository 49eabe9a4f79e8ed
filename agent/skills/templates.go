package skills

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
)

// Template is a prompt template: a markdown file whose name is a command.
type Template struct {
	// Name is the file name without ".md".
	Name string
	// Description is the front matter's, or the body's first non-empty
	// line cut at 60 characters.
	Description string
	// ArgumentHint is the front matter's argument-hint, if any.
	ArgumentHint string
	// Content is the body after the front matter.
	Content  string
	FilePath string
	// SHA256 is the hex SHA-256 of the whole file as it was read.
	SHA256 string
}

// LoadTemplates returns the prompt templates of src.Prompts in order
// (only the *.md files directly in each folder; a folder that does not
// exist is reported). When two have the same name the first is used (pi's
// expansion finds the first).
func LoadTemplates(src Sources) ([]Template, []Diagnostic) {
	var out []Template
	var diags []Diagnostic
	for _, raw := range src.Prompts {
		dir := resolvePath(raw)
		entries, err := os.ReadDir(dir)
		if err != nil {
			diags = append(diags, Diagnostic{Path: dir, Message: "prompt folder cannot be read: " + err.Error(), Skipped: true})
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".md") {
				continue
			}
			t, err := loadTemplate(p)
			if err != nil {
				diags = append(diags, Diagnostic{Path: p, Message: err.Error(), Skipped: true})
				continue
			}
			out = append(out, t)
		}
	}
	return out, diags
}

func loadTemplate(path string) (Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Template{}, err
	}
	fm, body, err := parseFrontmatter(string(data))
	if err != nil {
		return Template{}, err
	}
	t := Template{Name: strings.TrimSuffix(filepath.Base(path), ".md"), Content: body, FilePath: path, SHA256: hexSHA256(data)}
	t.Description, _ = fm["description"].(string)
	t.ArgumentHint, _ = fm["argument-hint"].(string)
	if t.Description == "" {
		for line := range strings.SplitSeq(body, "\n") {
			if jsTrim(line) != "" {
				t.Description = cut60(line)
				break
			}
		}
	}
	return t, nil
}

// cut60 cuts s at 60 UTF-16 units and marks the cut with "...", as pi's
// firstLine.slice(0, 60).
func cut60(s string) string {
	u := utf16.Encode([]rune(s))
	if len(u) <= 60 {
		return s
	}
	return string(utf16.Decode(u[:60])) + "..."
}

// ParseArgs splits a template command's arguments as pi does: on spaces
// and tabs, with single or double quotes grouping (and removed).
func ParseArgs(s string) []string {
	var args []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote = r
		case r == ' ' || r == '\t':
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}

var (
	// A sync.OnceValue of an immutable value: built on first use, not at start-up.
	positionalRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$(\d+)`) })
	// A sync.OnceValue of an immutable value: built on first use, not at start-up.
	sliceRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{@:(\d+)(?::(\d+))?\}`) })
)

// Substitute fills a template's placeholders as pi does, in pi's order:
// $1, $2, … (missing: empty), then ${@:N} and ${@:N:L} (bash-style
// slices), then $ARGUMENTS and $@ (all arguments joined by spaces).
func Substitute(content string, args []string) string {
	out := positionalRE().ReplaceAllStringFunc(content, func(m string) string {
		n, err := strconv.Atoi(m[1:])
		if err != nil || n < 1 || n > len(args) {
			return ""
		}
		return args[n-1]
	})
	out = sliceRE().ReplaceAllStringFunc(out, func(m string) string {
		sub := sliceRE().FindStringSubmatch(m)
		start, err := strconv.Atoi(sub[1])
		if err != nil || start-1 >= len(args) {
			return ""
		}
		start = max(start-1, 0)
		end := len(args)
		if sub[2] != "" {
			l, err := strconv.Atoi(sub[2])
			if err == nil && start+l < end {
				end = start + l
			}
		}
		return strings.Join(args[start:end], " ")
	})
	all := strings.Join(args, " ")
	out = replaceJS(out, "$ARGUMENTS", all)
	return replaceJS(out, "$@", all)
}

// replaceJS replaces every old in s with repl the way JavaScript's
// String.replace(/old/g, repl) does, which pi uses for $ARGUMENTS and $@:
// in repl "$$" is "$", "$&" the match, "$`" the text before it and "$'"
// the text after it.
func replaceJS(s, old, repl string) string {
	if !strings.Contains(s, old) {
		return s
	}
	var b strings.Builder
	rest := 0
	for {
		i := strings.Index(s[rest:], old)
		if i < 0 {
			break
		}
		at := rest + i
		b.WriteString(s[rest:at])
		for j := 0; j < len(repl); j++ {
			if repl[j] != '$' || j+1 == len(repl) {
				b.WriteByte(repl[j])
				continue
			}
			switch repl[j+1] {
			case '$':
				b.WriteByte('$')
			case '&':
				b.WriteString(old)
			case '`':
				b.WriteString(s[:at])
			case '\'':
				b.WriteString(s[at+len(old):])
			default:
				b.WriteByte('$')
				continue
			}
			j++
		}
		rest = at + len(old)
	}
	b.WriteString(s[rest:])
	return b.String()
}

// ExpandTemplate expands "/name args" when name is a template, as pi's
// expandPromptTemplate; other text comes back unchanged and ok is false.
func ExpandTemplate(text string, templates []Template) (out string, ok bool) {
	if !strings.HasPrefix(text, "/") {
		return text, false
	}
	name, args, _ := strings.Cut(text[1:], " ")
	for _, t := range templates {
		if t.Name == name {
			return Substitute(t.Content, ParseArgs(args)), true
		}
	}
	return text, false
}

// Expand applies pi's expansion of a prompt: "/skill:NAME args" first,
// then a prompt template "/name args". Other text comes back unchanged.
func Expand(text string, skills []Skill, templates []Template) (string, error) {
	out, _, err := ExpandSkill(text, skills)
	if err != nil {
		return text, err
	}
	out, _ = ExpandTemplate(out, templates)
	return out, nil
}
