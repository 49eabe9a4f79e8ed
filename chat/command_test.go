package chat

import (
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		text, bot string
		want      *Command
	}{
		{"/help", "", &Command{Name: "help"}},
		{"/Model gpt-5 fast", "", &Command{Name: "model", Args: "gpt-5 fast"}},
		{"/new@PiBot hi", "pibot", &Command{Name: "new", Args: "hi"}},
		{"/new@other hi", "pibot", nil},
		{"/run\nline two", "", &Command{Name: "run", Args: "line two"}},
		{"hello", "", nil},
		{"/", "", nil},
		{"/bad!name", "", nil},
		// The old migration command is text like any other: a command the
		// gateway does not know, never a platform event.
		{"/__migrate -1009999", "", &Command{Name: "__migrate", Args: "-1009999"}},
	}
	for _, tt := range tests {
		got := ParseCommand(tt.text, tt.bot)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("ParseCommand(%q, %q) = %+v, want %+v", tt.text, tt.bot, got, tt.want)
		}
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/help", "/a@b c", "/x\ty", "/@", "//", "/ü", "text"} {
		f.Add(s, "bot")
	}
	f.Fuzz(func(t *testing.T, text, bot string) {
		c := ParseCommand(text, bot)
		if c == nil {
			return
		}
		if c.Name == "" || c.Name != strings.ToLower(c.Name) || strings.ContainsAny(c.Name, "/@ \n") {
			t.Fatalf("bad name %q from %q", c.Name, text)
		}
		if c.Args != strings.TrimSpace(c.Args) {
			t.Fatalf("untrimmed args %q", c.Args)
		}
	})
}

func TestParseCommandPrefix(t *testing.T) {
	tests := []struct {
		text, bot string
		prefixes  []string
		want      *Command
	}{
		{"!stop", "", []string{"/", "!"}, &Command{Name: "stop"}},
		{"!Model fast", "", []string{"/", "!"}, &Command{Name: "model", Args: "fast"}},
		{"/stop", "", []string{"/", "!"}, &Command{Name: "stop"}},
		{"!stop", "", nil, nil}, // no prefixes: "/" only
		{"/stop", "", nil, &Command{Name: "stop"}},
		{"!stop", "", []string{"/"}, nil},
		{"!", "", []string{"!"}, nil},
		{"! stop", "", []string{"!"}, nil},
		{"!!stop", "", []string{"!"}, nil},
		{"!!stop", "", []string{"!", "!!"}, &Command{Name: "stop"}}, // longest prefix wins
		{"stop", "", []string{""}, nil},                             // an empty prefix is ignored
		{"!stop@pibot now", "PiBot", []string{"!"}, &Command{Name: "stop", Args: "now"}},
		{"!stop@other now", "pibot", []string{"!"}, nil},
		{"!run\nline two", "", []string{"!"}, &Command{Name: "run", Args: "line two"}},
	}
	for _, tt := range tests {
		got := ParseCommandPrefix(tt.text, tt.bot, tt.prefixes...)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("ParseCommandPrefix(%q, %q, %q) = %+v, want %+v", tt.text, tt.bot, tt.prefixes, got, tt.want)
		}
	}
}

// ParseCommandPrefix with "/" is ParseCommand, and a second prefix never
// changes what "/" text parses to.
func FuzzParseCommandPrefix(f *testing.F) {
	for _, s := range []string{"/help", "!stop", "!a@b c", "!!x", "/x\ty", "!", "text"} {
		f.Add(s, "bot")
	}
	f.Fuzz(func(t *testing.T, text, bot string) {
		want := ParseCommand(text, bot)
		for _, prefixes := range [][]string{nil, {"/"}, {"/", "!"}} {
			got := ParseCommandPrefix(text, bot, prefixes...)
			if strings.HasPrefix(text, "!") && len(prefixes) == 2 {
				if got != nil && (got.Name == "" || got.Name != strings.ToLower(got.Name) || strings.ContainsAny(got.Name, "/!@ \n")) {
					t.Fatalf("bad name %q from %q", got.Name, text)
				}
				continue
			}
			if (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Fatalf("ParseCommandPrefix(%q, %q, %q) = %+v, ParseCommand = %+v", text, bot, prefixes, got, want)
			}
		}
	})
}
