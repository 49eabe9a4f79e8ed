package tools

import (
	"strings"
)

// diffPart is a run of lines that are unchanged, added or removed, like
// a part of jsdiff's diffLines result.
type diffPart struct {
	lines   []string // tokens, each with its trailing "\n" if it had one
	added   bool
	removed bool
}

// lineTokens splits s into lines that keep their trailing newline.
func lineTokens(s string) []string {
	if s == "" {
		return nil
	}
	toks := strings.SplitAfter(s, "\n")
	if toks[len(toks)-1] == "" {
		toks = toks[:len(toks)-1]
	}
	return toks
}

// maxDiffCells bounds the LCS table; larger middles are shown as one
// removal and one addition.
const maxDiffCells = 4_000_000

// diffLines compares two texts line by line (longest common subsequence);
// in a change, removed lines come before added lines.
func diffLines(a, b string) []diffPart {
	x, y := lineTokens(a), lineTokens(b)
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var ops []byte // '=', '-', '+' per token
	for i := 0; i < pre; i++ {
		ops = append(ops, '=')
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	if len(mx)*len(my) > maxDiffCells || len(mx) == 0 || len(my) == 0 {
		for range mx {
			ops = append(ops, '-')
		}
		for range my {
			ops = append(ops, '+')
		}
	} else {
		ops = append(ops, lcsOps(mx, my)...)
	}
	for i := 0; i < suf; i++ {
		ops = append(ops, '=')
	}
	var parts []diffPart
	xi, yi := 0, 0
	for _, op := range ops {
		var tok string
		switch op {
		case '=':
			tok = x[xi]
			xi++
			yi++
		case '-':
			tok = x[xi]
			xi++
		case '+':
			tok = y[yi]
			yi++
		}
		add, rem := op == '+', op == '-'
		if n := len(parts); n > 0 && parts[n-1].added == add && parts[n-1].removed == rem {
			parts[n-1].lines = append(parts[n-1].lines, tok)
			continue
		}
		parts = append(parts, diffPart{lines: []string{tok}, added: add, removed: rem})
	}
	return reorderChanges(parts)
}

// lcsOps returns edit operations turning x into y.
func lcsOps(x, y []string) []byte {
	n, m := len(x), len(y)
	t := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return t[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				t[i*(m+1)+j] = at(i+1, j+1) + 1
			} else {
				t[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
			}
		}
	}
	var ops []byte
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			ops = append(ops, '=')
			i++
			j++
		case at(i+1, j) >= at(i, j+1):
			ops = append(ops, '-')
			i++
		default:
			ops = append(ops, '+')
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, '-')
	}
	for ; j < m; j++ {
		ops = append(ops, '+')
	}
	return ops
}

// reorderChanges merges adjacent change parts so every change reads as
// one removal followed by one addition.
func reorderChanges(parts []diffPart) []diffPart {
	var out []diffPart
	for i := 0; i < len(parts); {
		if !parts[i].added && !parts[i].removed {
			out = append(out, parts[i])
			i++
			continue
		}
		var rem, add []string
		for i < len(parts) && (parts[i].added || parts[i].removed) {
			if parts[i].removed {
				rem = append(rem, parts[i].lines...)
			} else {
				add = append(add, parts[i].lines...)
			}
			i++
		}
		if len(rem) > 0 {
			out = append(out, diffPart{lines: rem, removed: true})
		}
		if len(add) > 0 {
			out = append(out, diffPart{lines: add, added: true})
		}
	}
	return out
}

// generateDiff renders pi's edit diff: "+N text", "-N text", " N text"
// with line numbers padded to a common width, contextLines of context and
// " <pad> ..." for skipped lines. It returns the first changed line of the
// new text (0 when nothing changed).
func generateDiff(oldText, newText string, contextLines int) (string, int) {
	parts := diffLines(oldText, newText)
	width := len(itoa(max(strings.Count(oldText, "\n"), strings.Count(newText, "\n")) + 1))
	pad := func(n int) string {
		s := itoa(n)
		return strings.Repeat(" ", max(0, width-len(s))) + s
	}
	gap := " " + strings.Repeat(" ", width) + " ..."
	var out []string
	oldN, newN, first := 1, 1, 0
	lastWasChange := false
	ctxLine := func(line string) {
		out = append(out, " "+pad(oldN)+" "+line)
		oldN++
		newN++
	}
	for i, p := range parts {
		raw := make([]string, len(p.lines))
		for k, l := range p.lines {
			raw[k] = strings.TrimSuffix(l, "\n")
		}
		if p.added || p.removed {
			if first == 0 {
				first = newN
			}
			for _, l := range raw {
				if p.added {
					out = append(out, "+"+pad(newN)+" "+l)
					newN++
				} else {
					out = append(out, "-"+pad(oldN)+" "+l)
					oldN++
				}
			}
			lastWasChange = true
			continue
		}
		next := i < len(parts)-1 && (parts[i+1].added || parts[i+1].removed)
		switch {
		case lastWasChange && next:
			if len(raw) <= contextLines*2 {
				for _, l := range raw {
					ctxLine(l)
				}
			} else {
				for _, l := range raw[:contextLines] {
					ctxLine(l)
				}
				skipped := len(raw) - 2*contextLines
				out = append(out, gap)
				oldN += skipped
				newN += skipped
				for _, l := range raw[len(raw)-contextLines:] {
					ctxLine(l)
				}
			}
		case lastWasChange:
			shown := raw[:min(contextLines, len(raw))]
			for _, l := range shown {
				ctxLine(l)
			}
			if skipped := len(raw) - len(shown); skipped > 0 {
				out = append(out, gap)
				oldN += skipped
				newN += skipped
			}
		case next:
			skipped := max(0, len(raw)-contextLines)
			if skipped > 0 {
				out = append(out, gap)
				oldN += skipped
				newN += skipped
			}
			for _, l := range raw[skipped:] {
				ctxLine(l)
			}
		default:
			oldN += len(raw)
			newN += len(raw)
		}
		lastWasChange = false
	}
	return strings.Join(out, "\n"), first
}
