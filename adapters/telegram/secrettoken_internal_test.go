package telegram

import (
	"strings"
	"testing"
)

// The webhook secret check accepts exactly what the Bot API does: 1-256
// characters of A-Z, a-z, 0-9, _ and -.
func TestValidSecretToken(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"a", true},
		{"AZaz09_-", true},
		{strings.Repeat("x", 256), true},
		{"", false},
		{strings.Repeat("x", 257), false},
		{"with space", false},
		{"dot.ted", false},
		{"slash/", false},
		{"ümlaut", false},
		{"new\nline", false},
		{"a\x00", false},
	} {
		if got := validSecretToken(tc.s); got != tc.want {
			t.Errorf("validSecretToken(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
