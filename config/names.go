package config

import "strings"

// The name checks below were regular expressions compiled when the
// package loaded (166 KB of heap in every pibot process, issue #15); the
// patterns are kept in the comments and in names_test.go, which checks
// the functions against them.

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlnum(c byte) bool { return isDigit(c) || isLower(c) || 'A' <= c && c <= 'Z' }

// name reports whether s has between minLen and maxLen bytes, the first
// passing first and the others rest.
func name(s string, minLen, maxLen int, first, rest func(byte) bool) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 0 && !first(s[i]) || i > 0 && !rest(s[i]) {
			return false
		}
	}
	return true
}

// isSnowflake matches a Discord id, a decimal snowflake: ^[0-9]{1,20}$.
func isSnowflake(s string) bool { return name(s, 1, 20, isDigit, isDigit) }

// lowerName is [a-z0-9_-].
func lowerName(c byte) bool { return isDigit(c) || isLower(c) || c == '_' || c == '-' }

// anyName is [A-Za-z0-9_-].
func anyName(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

// isCommandName matches a Discord application command name that pibot
// accepts (lower case; Discord allows more, pibot keeps it simple):
// ^[a-z0-9_-]{1,32}$.
func isCommandName(s string) bool { return name(s, 1, 32, lowerName, lowerName) }

// isHookName matches a hook name: ^[A-Za-z0-9_-]{1,64}$.
func isHookName(s string) bool { return name(s, 1, 64, anyName, anyName) }

// isMCPName matches an MCP server name ("__" is refused separately):
// ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$.
func isMCPName(s string) bool { return name(s, 1, 32, isAlnum, anyName) }

// isScheduleName matches a schedule name: ^[a-z0-9][a-z0-9_-]{0,31}$.
func isScheduleName(s string) bool {
	return name(s, 1, 32, func(c byte) bool { return isDigit(c) || isLower(c) }, lowerName)
}

// trimLinePrefix removes the "line N: " (^(yaml: )?line \d+: ) the YAML
// decoder and the Unmarshalers put in front of a message; Error carries
// the line itself.
func trimLinePrefix(msg string) string {
	s := strings.TrimPrefix(msg, "yaml: ")
	s, ok := strings.CutPrefix(s, "line ")
	if !ok {
		return msg
	}
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	if n == 0 {
		return msg
	}
	if rest, ok := strings.CutPrefix(s[n:], ": "); ok {
		return rest
	}
	return msg
}
