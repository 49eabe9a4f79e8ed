package chat

import (
	"strings"
	"unicode/utf8"
)

// splitCode cuts a code block into fenced chunks on line boundaries, each
// opened with fence and info and closed with fence. Lines longer than a
// chunk are cut between characters.
func (s *splitter) splitCode(fence, info, code string, limit int) []string {
	if LongestRun(code, fence[0]) >= len(fence) {
		fence = strings.Repeat(fence[:1], LongestRun(code, fence[0])+1)
	}
	open, closing := fence+info+"\n", "\n"+fence
	overhead := s.measure(open+"x"+closing) - 1
	budget := limit - overhead
	if budget < 1 {
		return s.degrade(open+code+closing, limit)
	}
	var lines []string
	for l := range strings.Lines(strings.TrimRight(code, "\n")) {
		l = strings.TrimRight(l, "\n")
		for l != "" && s.codeLineCost(l) > budget {
			cut := s.codeCut(l, budget)
			lines = append(lines, l[:cut])
			l = l[cut:]
		}
		lines = append(lines, l)
	}
	var out []string
	emit := func(ls []string) {
		if strings.TrimSpace(strings.Join(ls, "")) != "" {
			out = append(out, open+strings.Join(ls, "\n")+closing)
		}
	}
	start, size := 0, 0
	for i := 0; i < len(lines); i++ {
		cost := s.codeLineCost(lines[i]) + 1
		if i > start && size+cost > budget {
			// Estimates can drift from the real rendering; shrink to fit.
			end := i
			for end-start > 1 && s.measure(open+strings.Join(lines[start:end], "\n")+closing) > limit {
				end--
			}
			emit(lines[start:end])
			start, size, i = end, 0, end-1
			continue
		}
		size += cost
	}
	end := len(lines)
	for end-start > 1 && s.measure(open+strings.Join(lines[start:end], "\n")+closing) > limit {
		end--
	}
	emit(lines[start:end])
	if end < len(lines) {
		out = append(out, s.splitCode(fence, info, strings.Join(lines[end:], "\n"), limit)...)
	}
	return out
}

// codeLineCost estimates the rendered length of one code line.
func (s *splitter) codeLineCost(l string) int {
	switch s.d {
	case DialectTelegram, DialectSlack:
		return Len(escapeHTML(l), s.d)
	case DialectANSI:
		return utf8.RuneCountInString(l) + 4
	}
	return utf8.RuneCountInString(l)
}

// codeCut returns the byte offset of the longest prefix of l (at least one
// rune) whose rendered cost is within budget.
func (s *splitter) codeCut(l string, budget int) int {
	cost, cut := 0, 0
	if s.d == DialectANSI {
		cost = 4
	}
	for i, c := range l {
		n := s.codeLineCost(string(c))
		if s.d == DialectANSI {
			n -= 4
		}
		if cost+n > budget && cut > 0 {
			break
		}
		if cost+n > budget && cut == 0 && i > 0 {
			break
		}
		cost += n
		cut = i + utf8.RuneLen(c)
	}
	return cut
}
