package config

import (
	"regexp"
	"strings"
	"testing"
)

// TestNamesMatchPatterns checks every name function against the regular
// expression it replaced, over edge cases and every byte in each position.
func TestNamesMatchPatterns(t *testing.T) {
	checks := []struct {
		name    string
		pattern string
		f       func(string) bool
	}{
		{"snowflake", `^[0-9]{1,20}$`, isSnowflake},
		{"command", `^[a-z0-9_-]{1,32}$`, isCommandName},
		{"hook", `^[A-Za-z0-9_-]{1,64}$`, isHookName},
		{"mcp", `^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`, isMCPName},
		{"schedule", `^[a-z0-9][a-z0-9_-]{0,31}$`, isScheduleName},
	}
	inputs := []string{"", "a", "A", "0", "_", "-", "a-b_c", "Ab9", "_a", "-a", "a b", "a\n", "\na", "é", "aé",
		"123456789012345678901", "12345678901234567890", "a.b", "a__b"}
	for _, n := range []int{31, 32, 33, 63, 64, 65} {
		inputs = append(inputs, strings.Repeat("a", n), strings.Repeat("7", n), "x"+strings.Repeat("Z", n-1))
	}
	for c := range 256 {
		inputs = append(inputs, string(rune(c)), "a"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a")
	}
	for _, c := range checks {
		re := regexp.MustCompile(c.pattern)
		for _, in := range inputs {
			if got, want := c.f(in), re.MatchString(in); got != want {
				t.Errorf("%s(%q) = %v, %s says %v", c.name, in, got, c.pattern, want)
			}
		}
	}
}

func TestTrimLinePrefix(t *testing.T) {
	re := regexp.MustCompile(`^(yaml: )?line \d+: `)
	for _, in := range []string{"yaml: line 3: bad", "line 12: x", "yaml: line : x", "line 3 x", "yaml: unmarshal", "line 3: ",
		"yaml: yaml: line 3: x", "xline 3: y", "line 3: line 4: z", "", "line x: y", "yaml: line 0042: é"} {
		if got, want := trimLinePrefix(in), re.ReplaceAllString(in, ""); got != want {
			t.Errorf("trimLinePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}
