package telegramtest

import (
	"fmt"
	"html"
	"strings"
)

// allowedTags are the tags Telegram's HTML parse mode accepts.
var allowedTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "tg-spoiler": true, "span": true,
	"a": true, "code": true, "pre": true, "blockquote": true, "tg-emoji": true,
}

// parseHTML checks Telegram HTML (known tags, balanced, valid entities) and
// returns the visible text.
func parseHTML(s string) (string, error) {
	var out strings.Builder
	var stack []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return "", fmt.Errorf("unclosed start tag at byte offset %d", i)
			}
			tag := s[i+1 : i+end]
			i += end + 1
			closing := strings.HasPrefix(tag, "/")
			name := strings.ToLower(strings.TrimPrefix(tag, "/"))
			if j := strings.IndexAny(name, " \t\n"); j >= 0 {
				name = name[:j]
			}
			if !allowedTags[name] {
				return "", fmt.Errorf("unsupported start tag %q at byte offset %d", name, i)
			}
			if !closing {
				stack = append(stack, name)
				continue
			}
			if len(stack) == 0 || stack[len(stack)-1] != name {
				return "", fmt.Errorf("unexpected end tag %q at byte offset %d", name, i)
			}
			stack = stack[:len(stack)-1]
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 {
				return "", fmt.Errorf("unclosed entity at byte offset %d", i)
			}
			ent := s[i : i+end+1]
			dec := html.UnescapeString(ent)
			if dec == ent {
				return "", fmt.Errorf("unknown entity %q at byte offset %d", ent, i)
			}
			out.WriteString(dec)
			i += end + 1
		default:
			out.WriteByte(s[i])
			i++
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("can't find end tag corresponding to start tag %q", stack[len(stack)-1])
	}
	return out.String(), nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
