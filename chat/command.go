package chat

import "strings"

// ParseCommand parses "/name args" or "/name@bot args". It returns nil if
// text is not a command, or names another bot. botName may be "". It is
// ParseCommandPrefix(text, botName, "/").
func ParseCommand(text, botName string) *Command {
	return ParseCommandPrefix(text, botName, "/")
}

// ParseCommandPrefix parses a command introduced by one of prefixes, such as
// "!stop" with the prefixes "/" and "!" (Slack threads, where slash commands
// do not work). The longest prefix that starts text wins; without prefixes
// it is "/". The rest follows ParseCommand: a name of letters, digits, '_'
// and '-', optionally "@bot", then the arguments after a space, tab or
// newline. Empty prefixes are ignored, so text never becomes a command
// without one.
func ParseCommandPrefix(text, botName string, prefixes ...string) *Command {
	if len(prefixes) == 0 {
		prefixes = []string{"/"}
	}
	best := ""
	for _, p := range prefixes {
		if p != "" && len(p) > len(best) && strings.HasPrefix(text, p) {
			best = p
		}
	}
	if best == "" || len(text) <= len(best) {
		return nil
	}
	head, args, _ := strings.Cut(text[len(best):], " ")
	if i := strings.IndexAny(head, "\n\t"); i >= 0 {
		args = strings.TrimSpace(head[i:] + " " + args)
		head = head[:i]
	}
	name, at, hasAt := strings.Cut(head, "@")
	if hasAt && botName != "" && !strings.EqualFold(at, botName) {
		return nil
	}
	if name == "" {
		return nil
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return nil
		}
	}
	return &Command{Name: strings.ToLower(name), Args: strings.TrimSpace(args)}
}
