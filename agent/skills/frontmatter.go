package skills

import (
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// normalizeNewlines turns CRLF and CR into LF.
func normalizeNewlines(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// parseFrontmatter splits a markdown file into its YAML front matter and
// its body, by pi's rules: the file must start with "---"; the matter
// ends at the next line starting with "---"; the body after it is
// trimmed. Without front matter the body is the whole (normalised) text,
// untrimmed. Invalid YAML is an error.
func parseFrontmatter(content string) (map[string]any, string, error) {
	norm := normalizeNewlines(content)
	if !strings.HasPrefix(norm, "---") {
		return map[string]any{}, norm, nil
	}
	end := strings.Index(norm[3:], "\n---")
	if end < 0 {
		return map[string]any{}, norm, nil
	}
	end += 3
	matter := ""
	if end > 4 {
		matter = norm[4:end]
	}
	body := jsTrim(norm[end+4:])
	if matter == "" {
		return map[string]any{}, body, nil
	}
	var fm any
	if err := yaml.Unmarshal([]byte(matter), &fm); err != nil {
		return nil, "", fmt.Errorf("front matter: %w", err)
	}
	switch m := fm.(type) {
	case nil:
		return map[string]any{}, body, nil
	case map[string]any:
		return m, body, nil
	default:
		return nil, "", fmt.Errorf("front matter: not a mapping")
	}
}

// stringField returns fm[key] when it is a string; ok is false when the
// key is set to something else.
func stringField(fm map[string]any, key string) (s string, ok bool) {
	v, present := fm[key]
	if !present || v == nil {
		return "", true
	}
	s, ok = v.(string)
	return s, ok
}

// jsTrim trims like JavaScript's String.prototype.trim: Unicode white
// space and line terminators, including U+FEFF but not U+0085.
func jsTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return r == '\uFEFF' || r != '\u0085' && unicode.IsSpace(r)
	})
}
