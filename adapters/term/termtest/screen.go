// Package termtest holds a small terminal emulator for tests of the
// terminal chat: it turns what the chat prints into what a person sees.
package termtest

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Screen is a small terminal emulator, an io.Writer: it interprets text with
// wrapping, CR, LF (as CR LF, as a terminal's output processing does),
// cursor up and left, and clearing to the end of the line or the screen.
// Lines scrolled off the top stay in its text but are out of the cursor's
// reach, as on a real terminal. Other escape sequences (styles) take no
// room and are dropped. It is safe for concurrent use.
type Screen struct {
	cols, rows int

	mu    sync.Mutex
	lines [][]rune
	x, y  int
	wrap  bool   // pending wrap: the last column was written
	part  []byte // an incomplete escape sequence or rune from the last Write
}

// NewScreen returns an empty screen cols wide and rows high.
func NewScreen(cols, rows int) *Screen {
	return &Screen{cols: cols, rows: rows, lines: [][]rune{nil}}
}

// Write interprets p.
func (s *Screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	str := string(append(s.part, p...))
	s.part = nil
	for i := 0; i < len(str); {
		if str[i] == 0x1b {
			n, ok := escape(str[i:])
			if !ok {
				s.part = []byte(str[i:])
				break
			}
			if str[i+1] == '[' {
				s.csi(str[i+2:i+n-1], str[i+n-1])
			}
			i += n
			continue
		}
		if !utf8.FullRuneInString(str[i:]) {
			s.part = []byte(str[i:])
			break
		}
		r, n := utf8.DecodeRuneInString(str[i:])
		i += n
		switch {
		case r == '\r':
			s.x, s.wrap = 0, false
		case r == '\n':
			s.down()
			s.x = 0
		case r < 0x20:
		default:
			if s.wrap {
				s.down()
				s.x = 0
			}
			s.put(r)
		}
	}
	return len(p), nil
}

// escape is the length of the escape sequence at the start of s; ok is
// false when s ends before the sequence does.
func escape(s string) (n int, ok bool) {
	if len(s) < 2 {
		return 0, false
	}
	if s[1] != '[' {
		return 2, true
	}
	for i := 2; i < len(s); i++ {
		if s[i] >= 0x40 && s[i] <= 0x7e {
			return i + 1, true
		}
	}
	return 0, false
}

func (s *Screen) down() {
	s.wrap = false
	s.y++
	for len(s.lines) <= s.y {
		s.lines = append(s.lines, nil)
	}
}

func (s *Screen) put(r rune) {
	line := s.lines[s.y]
	for len(line) <= s.x {
		line = append(line, ' ')
	}
	line[s.x] = r
	s.lines[s.y] = line
	if s.x == s.cols-1 {
		s.wrap = true
	} else {
		s.x++
	}
}

func (s *Screen) csi(param string, f byte) {
	n, err := strconv.Atoi(param)
	if err != nil || n == 0 {
		n = 1
	}
	s.wrap = false
	switch f {
	case 'A':
		top := max(0, len(s.lines)-s.rows) // scrolled-off lines are out of reach
		s.y = max(top, s.y-n)
	case 'D':
		s.x = max(0, s.x-n)
	case 'K':
		if s.x < len(s.lines[s.y]) {
			s.lines[s.y] = s.lines[s.y][:s.x]
		}
	case 'J':
		if s.x < len(s.lines[s.y]) {
			s.lines[s.y] = s.lines[s.y][:s.x]
		}
		s.lines = s.lines[:s.y+1]
	}
}

// Text is everything the screen shows and scrolled off, trailing spaces
// and empty lines removed.
func (s *Screen) Text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, l := range s.lines {
		b.WriteString(strings.TrimRight(string(l), " "))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// Cursor returns the cursor's column and line (0 is the first line ever
// written).
func (s *Screen) Cursor() (x, y int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.x, s.y
}

// Lines is the number of lines written so far.
func (s *Screen) Lines() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}
