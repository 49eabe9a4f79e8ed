package main

import (
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// tableSynopses lists the command table's usage synopses in order.
func tableSynopses() []string {
	var out []string
	for _, cmd := range commands() {
		for _, l := range cmd.usage {
			out = append(out, l.synopsis)
		}
	}
	return out
}

// TestDocCommentMatchesCommandTable holds the package doc comment's
// usage list (main.go) to the command table, line for line.
func TestDocCommentMatchesCommandTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("main.go has no package doc comment")
	}
	var doc []string
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		if strings.HasPrefix(line, "\tpibot ") {
			doc = append(doc, strings.TrimPrefix(line, "\t"))
		}
	}
	if want := tableSynopses(); !slices.Equal(doc, want) {
		t.Errorf("main.go's doc comment lists\n\t%s\nthe command table (commands.go) has\n\t%s",
			strings.Join(doc, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestHelpListsCommandTable reads the usage pibot prints back into
// synopses: every one of the table's, in order, each with its help.
func TestHelpListsCommandTable(t *testing.T) {
	for _, arg := range []string{"help", "--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			out := ok(t, t.TempDir(), arg)
			var got []string
			lines := strings.Split(out, "\n")
			for i, line := range lines {
				if !strings.HasPrefix(line, "  pibot ") {
					continue
				}
				syn, help, found := strings.Cut(strings.TrimPrefix(line, "  "), "  ")
				if !found && i+1 < len(lines) {
					help = lines[i+1]
				}
				if strings.TrimSpace(help) == "" {
					t.Errorf("%q has no help", syn)
				}
				got = append(got, strings.TrimSpace(syn))
			}
			if want := tableSynopses(); !slices.Equal(got, want) {
				t.Errorf("pibot %s lists\n\t%s\nthe command table has\n\t%s", arg, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
		})
	}
}

// TestCommandTable checks each row: its synopses start with its name,
// and its name and aliases dispatch to it alone.
func TestCommandTable(t *testing.T) {
	seen := map[string]string{}
	for _, cmd := range commands() {
		if cmd.run == nil || len(cmd.usage) == 0 {
			t.Errorf("command %q lacks a run function or a usage line", cmd.name)
		}
		for _, l := range cmd.usage {
			if !strings.HasPrefix(l.synopsis, "pibot "+cmd.name) {
				t.Errorf("command %q: synopsis %q does not start with its name", cmd.name, l.synopsis)
			}
		}
		for _, n := range append([]string{cmd.name}, cmd.aliases...) {
			if other, dup := seen[n]; dup {
				t.Errorf("%q names both %q and %q", n, other, cmd.name)
			}
			seen[n] = cmd.name
			if got, found := findCommand(n); !found || got.name != cmd.name {
				t.Errorf("findCommand(%q) = %q, %v; want %q", n, got.name, found, cmd.name)
			}
		}
	}
	if _, found := findCommand("frobnicate"); found {
		t.Error("findCommand found a command that is not in the table")
	}
}
