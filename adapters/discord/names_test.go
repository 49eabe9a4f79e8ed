package discord

import (
	"regexp"
	"strings"
	"testing"
)

// TestNamesMatchPatterns checks isID and isCommand against the regular
// expressions they replaced.
func TestNamesMatchPatterns(t *testing.T) {
	checks := []struct {
		pattern string
		f       func(string) bool
	}{
		{`^[0-9]{1,20}$`, isID},
		{`^[a-z0-9_-]{1,32}$`, isCommand},
	}
	inputs := []string{"", "0", "a", "A", "-", "_", "a-b_c", "é", "1 2", "12\n",
		strings.Repeat("9", 19), strings.Repeat("9", 20), strings.Repeat("9", 21),
		strings.Repeat("a", 31), strings.Repeat("a", 32), strings.Repeat("a", 33)}
	for c := range 256 {
		inputs = append(inputs, string(rune(c)), "1"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a")
	}
	for _, c := range checks {
		re := regexp.MustCompile(c.pattern)
		for _, in := range inputs {
			if got, want := c.f(in), re.MatchString(in); got != want {
				t.Errorf("%s: %q = %v, want %v", c.pattern, in, got, want)
			}
		}
	}
}
