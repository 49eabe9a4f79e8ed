package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pibot/pibot/internal/transcript"
	"github.com/pibot/pibot/session"
)

// sessionCmd is `pibot session ...`: it lists, shows, forks, repairs and
// exports session files.
type sessionCmd struct{ *cli }

// run runs `pibot session ...`.
func (c sessionCmd) run(args []string) error {
	if len(args) == 0 {
		return usageErr("session: want ls, tree, context, fork, repair or export")
	}
	sub, rest := args[0], args[1:]
	fs := c.newFlags("session " + sub)
	switch sub {
	case "ls":
		file := configFlag(fs)
		pos, err := parseArgs(fs, rest)
		if err != nil {
			return err
		}
		if len(pos) > 1 {
			return usageErr("session ls: want at most one DIR")
		}
		dir := ""
		if len(pos) == 1 {
			dir = pos[0]
		} else {
			cfg, _, err := c.loadConfig(*file)
			if err != nil {
				return err
			}
			dir = dataPath(cfg, "sessions")
		}
		return c.list(dir)
	case "tree":
		file := configFlag(fs)
		all := fs.Bool("all", false, "show every entry, not only the user's turns")
		pos, err := parseArgs(fs, rest)
		if err != nil {
			return err
		}
		path, err := c.arg("session tree", pos, *file)
		if err != nil {
			return err
		}
		s, err := c.openReadOnly(path)
		if err != nil {
			return err
		}
		defer s.Close()
		return session.TreeText(c.stdout, s.Tree(), session.TreeOptions{All: *all})
	case "context":
		file := configFlag(fs)
		leaf := fs.String("leaf", "", "entry `ID` to use as the leaf (default: pi's default leaf, the last entry)")
		stats := fs.Bool("stats", false, "print on stderr how the answer was built and where the time went (read, index, validate, emit)")
		pos, err := parseArgs(fs, rest)
		if err != nil {
			return err
		}
		path, err := c.arg("session context", pos, *file)
		if err != nil {
			return err
		}
		return c.printContext(path, *leaf, *stats)
	case "fork":
		file := configFlag(fs)
		at := fs.String("at", "", "entry `ID` the fork ends at (required)")
		out := fs.String("o", "", "output `DIR` (default: the source file's directory)")
		pos, err := parseArgs(fs, rest)
		if err != nil {
			return err
		}
		if *at == "" {
			return usageErr("session fork: --at ID is required")
		}
		path, err := c.arg("session fork", pos, *file)
		if err != nil {
			return err
		}
		return c.fork(path, *at, *out)
	case "repair":
		file := configFlag(fs)
		dry := fs.Bool("dry-run", false, "report what would be repaired without writing")
		pos, err := parseArgs(fs, rest)
		if err != nil {
			return err
		}
		path, err := c.arg("session repair", pos, *file)
		if err != nil {
			return err
		}
		return c.repair(path, *dry)
	case "export":
		file := configFlag(fs)
		leaf := fs.String("leaf", "", "entry `ID` ending the exported branch (default: the default leaf)")
		format := fs.String("format", "jsonl", "`format`: jsonl (pi's export of one branch), md (that branch as Markdown) or html (the whole tree as one page)")
		out := fs.String("o", "", "write to `FILE` instead of standard output")
		pos, err := parseArgs(fs, rest)
		if err != nil {
			return err
		}
		path, err := c.arg("session export", pos, *file)
		if err != nil {
			return err
		}
		return c.export(path, *leaf, *out, *format)
	}
	return usageErr("session: unknown subcommand %q (want ls, tree, context, fork, repair or export)", sub)
}

// arg resolves the one SESSION argument of a subcommand (see
// sessionPath).
func (c sessionCmd) arg(name string, pos []string, configFile string) (string, error) {
	if err := wantArgs(name, pos, 1, "SESSION"); err != nil {
		return "", err
	}
	return c.sessionPath(pos[0], configFile)
}

// printContext prints the context of one leaf as a JSON line, streamed
// from the file (session.WriteContext), and reports damage on stderr.
func (c sessionCmd) printContext(path, leaf string, stats bool) error {
	t0 := time.Now()
	var st session.ContextStats
	r, err := session.WriteContext(c.stdout, path, leaf, &st)
	if r.Path != "" {
		c.reportDamage(r)
	}
	if err != nil {
		return err
	}
	if stats {
		how := "fast (envelope index)"
		if !st.Fast {
			how = "full loader: " + st.Fallback
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
		fmt.Fprintf(c.stderr, "stats: %s; %d entries, %d on the path, %d bytes read, %d written\n", how, st.Lines, st.Path, st.Bytes, st.Out)
		fmt.Fprintf(c.stderr, "stats: index %s, validate %s, emit %s (reads in them %s), total %s\n",
			ms(st.Index), ms(st.Validate), ms(st.Emit), ms(st.Read), ms(time.Since(t0)))
	}
	return nil
}

// openReadOnly opens a session without writing to it and reports every
// damaged line on stderr as FILE:LINE.
func (c sessionCmd) openReadOnly(path string) (*session.Session, error) {
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	c.reportDamage(s.Report())
	return s, nil
}

func (c *cli) reportDamage(r session.Report) {
	for _, l := range r.SkippedLines {
		fmt.Fprintf(c.stderr, "%s:%d: skipped damaged line: %s\n", r.Path, l.Line, l.Err)
	}
	for _, line := range r.StaleFenced {
		fmt.Fprintf(c.stderr, "%s:%d: ignored entry with a stale fence\n", r.Path, line)
	}
	for _, id := range slices.Sorted(maps.Keys(r.Cycles)) {
		fmt.Fprintf(c.stderr, "%s: entry %s: parentId %s makes a loop (pi would never finish reading it); read as a root\n", r.Path, id, r.Cycles[id])
	}
	if r.TailBytes > 0 {
		verb := "ignored"
		if r.TailTruncated {
			verb = "truncated"
		}
		fmt.Fprintf(c.stderr, "%s:%d: %s torn last line (%d bytes)\n", r.Path, r.TailLine, verb, r.TailBytes)
	}
}

// list prints every session under dir, recursively, most recently
// modified first.
func (c sessionCmd) list(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("session ls: %w", err)
	}
	all, err := listSessions(dir)
	if err != nil {
		return fmt.Errorf("session ls: %w", err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODIFIED\tMSGS\tNAME\tFIRST MESSAGE\tFILE")
	for _, in := range all {
		rel, err := filepath.Rel(dir, in.Path)
		if err != nil {
			rel = in.Path
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", in.Modified.Local().Format(time.DateTime), in.MessageCount,
			oneLine(in.Name, 30), oneLine(in.FirstMessage, 50), rel)
	}
	return tw.Flush()
}

// oneLine collapses whitespace and shortens s to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

// fork copies the branch of path that ends at entry at into a new
// session file in outDir (default: beside path) and prints its path.
func (c sessionCmd) fork(path, at, outDir string) error {
	src, err := c.openReadOnly(path)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, ok := src.Tree().Get(at); !ok {
		return fmt.Errorf("session fork: %s: entry %s not found", path, at)
	}
	if outDir == "" {
		outDir = filepath.Dir(path)
	}
	forked, err := session.Fork(src, at, outDir, session.Options{})
	if err != nil {
		return err
	}
	if err := forked.Close(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, forked.Path())
	return nil
}

// repairChanged reports whether a repair changed the file on disk; damage
// it cannot change (stale fenced entries, bad lines an earlier repair
// already recorded) is skipped on every read.
func repairChanged(r session.Report) bool {
	migrated := r.FromVersion != 0 && r.FromVersion != session.CurrentVersion
	return r.TailTruncated || r.BrokenCopy != "" || r.RepairEntry != "" || r.MissingNewline || migrated || len(r.Cycles) > 0
}

// repairWouldChange repairs a temporary copy of path and reports whether
// that changed it.
func repairWouldChange(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("session repair: %w", err)
	}
	dir, err := os.MkdirTemp("", "pibot-repair-")
	if err != nil {
		return false, fmt.Errorf("session repair: %w", err)
	}
	defer os.RemoveAll(dir)
	cp := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		return false, fmt.Errorf("session repair: %w", err)
	}
	r, err := session.Repair(cp, false)
	if err != nil {
		return false, fmt.Errorf("session repair: trial on a copy: %w", err)
	}
	return repairChanged(r), nil
}

// repair repairs path, or with dryRun says whether it needs it:
// a dry run exits 1 when a repair would change the file.
func (c sessionCmd) repair(path string, dryRun bool) error {
	r, err := session.Repair(path, dryRun)
	if err != nil {
		return err
	}
	c.reportDamage(r)
	if r.MissingNewline {
		fmt.Fprintf(c.stderr, "%s: last line had no final newline\n", r.Path)
	}
	if r.FromVersion != 0 && r.FromVersion != session.CurrentVersion {
		fmt.Fprintf(c.stderr, "%s: version %d file migrated to %d\n", r.Path, r.FromVersion, session.CurrentVersion)
	}
	for child, parent := range r.Reattached {
		fmt.Fprintf(c.stderr, "%s: entry %s re-attached under %s\n", r.Path, child, parent)
	}
	migrated := r.FromVersion != 0 && r.FromVersion != session.CurrentVersion
	changed := repairChanged(r)
	if dryRun && !r.Clean() {
		// Only a repair knows what it would write (a repair entry an
		// earlier repair already recorded is not written again): repair
		// a copy.
		if changed, err = repairWouldChange(path); err != nil {
			return err
		}
	}
	switch {
	case r.Clean() && !migrated:
		fmt.Fprintf(c.stdout, "%s: nothing to repair\n", path)
	case !changed:
		fmt.Fprintf(c.stdout, "%s: nothing to repair: the damage above is skipped whenever the file is read\n", path)
	case dryRun:
		fmt.Fprintf(c.stdout, "%s: needs repair; run without --dry-run to repair it\n", path)
		return &exitError{code: 1}
	default:
		msg := "repaired"
		if r.BrokenCopy != "" {
			msg += ", original kept as " + r.BrokenCopy
		}
		if r.RepairEntry != "" {
			msg += ", repair recorded in entry " + r.RepairEntry
		}
		fmt.Fprintf(c.stdout, "%s: %s\n", path, msg)
	}
	return nil
}

// export writes one branch in pi's exportToJsonl format (a header
// with the same session id and cwd and a new timestamp, then the entries
// with their parents re-chained into a line), that branch as Markdown, or
// the whole tree as one HTML page.
func (c sessionCmd) export(path, leaf, out, format string) (err error) {
	s, err := c.openReadOnly(path)
	if err != nil {
		return err
	}
	defer s.Close()
	var buf bytes.Buffer
	switch format {
	case "jsonl":
		data, err := session.Export(s.Tree(), leaf, time.Now())
		if err != nil {
			return fmt.Errorf("session export %s: %w", path, err)
		}
		buf.Write(data)
	case "md", "markdown":
		if err := transcript.Markdown(&buf, s.Tree(), leaf); err != nil {
			return fmt.Errorf("session export %s: %w", path, err)
		}
	case "html":
		if leaf != "" {
			return usageErr("session export: --leaf does not apply to --format html, which shows the whole tree")
		}
		if err := transcript.HTML(&buf, s.Tree()); err != nil {
			return fmt.Errorf("session export %s: %w", path, err)
		}
	default:
		return usageErr("session export: --format must be jsonl, md or html, not %q", format)
	}
	if out == "" {
		_, err = c.stdout.Write(buf.Bytes())
		return err
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("session export: %s already exists", out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("session export: %w", err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("session export: %w", err)
	}
	if format == "jsonl" {
		fmt.Fprintln(c.stderr, "exported", bytes.Count(buf.Bytes(), []byte{'\n'})-1, "entries to", out)
	} else {
		fmt.Fprintln(c.stderr, "exported to", out)
	}
	return nil
}
