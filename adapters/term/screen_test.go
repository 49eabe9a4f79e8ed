package term

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
)

// screen is a small terminal emulator: it interprets what the adapter
// prints (text with wrapping, CR, LF, cursor up/left, clear to the end of
// the line or screen) into lines, so tests check what a person sees
// rather than the escape sequences.
type screen struct {
	cols, rows int
	lines      [][]rune
	x, y       int
	wrap       bool // pending wrap: the last column was written
}

func newScreen(cols, rows int) *screen {
	return &screen{cols: cols, rows: rows, lines: [][]rune{nil}}
}

func (s *screen) Write(p []byte) (int, error) {
	str := string(p)
	for i := 0; i < len(str); {
		r, n := []rune(str[i:])[0], len(string([]rune(str[i:])[0]))
		switch {
		case r == '\r':
			s.x, s.wrap = 0, false
		case r == '\n':
			s.down()
			s.x = 0 // the terminal's output processing turns LF into CR LF
		case r == 0x1b && i+1 < len(str) && str[i+1] == '[':
			j := i + 2
			for j < len(str) && (str[j] < 0x40 || str[j] > 0x7e) {
				j++
			}
			s.csi(str[i+2:j], str[j])
			n = j + 1 - i
		default:
			if s.wrap {
				s.down()
				s.x = 0
			}
			s.put(r)
		}
		i += n
	}
	return len(p), nil
}

func (s *screen) down() {
	s.wrap = false
	s.y++
	for len(s.lines) <= s.y {
		s.lines = append(s.lines, nil)
	}
}

func (s *screen) put(r rune) {
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

func (s *screen) csi(param string, f byte) {
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

// text is the screen's content, trailing spaces and empty lines removed.
func (s *screen) text() string {
	var b strings.Builder
	for _, l := range s.lines {
		b.WriteString(strings.TrimRight(string(l), " "))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// TestLiveStreamRedrawsInPlace streams a reply to a live terminal: the
// screen ends up with the final reply once, however many updates (and
// rewrites of earlier lines, and wrapped lines) it took.
func TestLiveStreamRedrawsInPlace(t *testing.T) {
	ctx := t.Context()
	scr := newScreen(20, 10)
	a, err := New(Config{In: strings.NewReader(""), Out: scr, Live: true, Size: func() (int, int) { return 20, 10 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "before"}); err != nil {
		t.Fatal(err)
	}
	st, err := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updates := []string{
		"Hel ▌",
		"Hello ▌",
		"Hello\n\n⏳ bash · ls ▌",
		"Hello\n\n✓ bash · ls\n\nA line long enough to wrap twice on twenty columns ▌",
		"Hello\n\n✓ bash · ls\n\nA line long enough to wrap twice on twenty columns, done ▌",
	}
	for _, u := range updates {
		if err := st.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	final := "Hello\n\n✓ bash · ls\n\nA line long enough to wrap twice on twenty columns, done."
	if _, err := st.Finish(ctx, chat.Out{Markdown: final}); err != nil {
		t.Fatal(err)
	}
	want := "before\nHello\n\n✓ bash · ls\n\nA line long enough t\no wrap twice on twen\nty columns, done."
	if got := scr.text(); got != want {
		t.Errorf("screen:\n%s\nwant:\n%s", got, want)
	}
	if scr.x != 0 || scr.y != len(scr.lines)-1 {
		t.Errorf("cursor at %d,%d: the reply does not end with a newline", scr.x, scr.y)
	}
}

// TestLiveEditOfLastMessage edits the message that ends the output in
// place, and prints an older one again.
func TestLiveEditOfLastMessage(t *testing.T) {
	ctx := t.Context()
	scr := newScreen(40, 10)
	a, _ := New(Config{In: strings.NewReader(""), Out: scr, Live: true})
	one, _ := a.Send(ctx, Conv(), chat.Out{Markdown: "one"})
	two, _ := a.Send(ctx, Conv(), chat.Out{Markdown: "two\nlines"})
	if err := a.Edit(ctx, two, chat.Out{Markdown: "two\nlines, edited"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(ctx, one, chat.Out{Markdown: "one, edited"}); err != nil {
		t.Fatal(err)
	}
	want := "one\ntwo\nlines, edited\n↻ edited\none, edited"
	if got := scr.text(); got != want {
		t.Errorf("screen:\n%s\nwant:\n%s", got, want)
	}
}

// TestLiveAbortTakesTheStreamOff: an aborted stream leaves nothing behind,
// so the message sent in its place is not shown twice.
func TestLiveAbortTakesTheStreamOff(t *testing.T) {
	ctx := t.Context()
	scr := newScreen(40, 10)
	a, _ := New(Config{In: strings.NewReader(""), Out: scr, Live: true})
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	if err := st.Update(ctx, "partial\ntext"); err != nil {
		t.Fatal(err)
	}
	if err := st.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "partial\ntext, whole"}); err != nil {
		t.Fatal(err)
	}
	if got, want := scr.text(), "partial\ntext, whole"; got != want {
		t.Errorf("screen %q, want %q", got, want)
	}
}

// TestPipeStreamPrintsFinalOnly: to a pipe, a streamed reply is printed
// once, its final text, with a newline.
func TestPipeStreamPrintsFinalOnly(t *testing.T) {
	ctx := t.Context()
	a, out := newTerm(t, strings.NewReader(""))
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	for _, u := range []string{"a ▌", "ab ▌", "abc ▌"} {
		if err := st.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: "abc."}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: "again"}); err == nil {
		t.Error("Finish twice succeeded")
	}
	if got := out.String(); got != "abc.\n" {
		t.Errorf("output %q", got)
	}
}

func TestDisplayWidth(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"abc", 3},
		{"\x1b[1mbold\x1b[22m", 4},
		{"日本", 4},
		{"a\tb", 9},
		{"✓ ok", 4},
	}
	for _, tt := range tests {
		if got := displayWidth(tt.s); got != tt.want {
			t.Errorf("displayWidth(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
	if got := screenRows("12345\n\n1234567890x", 5); got != 1+1+3 {
		t.Errorf("screenRows = %d", got)
	}
}

// TestLiveStatusLine: on a live terminal the status is one transient line
// below the conversation: replaced by the next status, taken away by the
// reply (which is still redrawn in place) and by "".
func TestLiveStatusLine(t *testing.T) {
	ctx := t.Context()
	scr := newScreen(40, 10)
	a, _ := New(Config{In: strings.NewReader(""), Out: scr, Live: true})
	if a.Caps(Conv()).TypingRefresh <= 0 {
		t.Fatal("a live terminal has no status line")
	}
	step := func(name, want string) {
		t.Helper()
		if got := scr.text(); got != want {
			t.Fatalf("%s: screen %q, want %q", name, got, want)
		}
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "before"}); err != nil {
		t.Fatal(err)
	}
	_ = a.SetStatus(ctx, Conv(), "thinking…")
	_ = a.SetStatus(ctx, Conv(), "thinking…") // a refresh: drawn once
	step("thinking", "before\n… thinking…")
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	_ = st.Update(ctx, "Hello")
	step("reply", "before\nHello")
	_ = a.SetStatus(ctx, Conv(), "running bash…")
	step("tool", "before\nHello\n… running bash…")
	_ = st.Update(ctx, "Hello world")
	step("reply again", "before\nHello world")
	_ = a.SetStatus(ctx, Conv(), "running ls…")
	_ = a.SetStatus(ctx, Conv(), "")
	step("cleared", "before\nHello world")
	if _, err := st.Finish(ctx, chat.Out{Markdown: "Hello world."}); err != nil {
		t.Fatal(err)
	}
	step("final", "before\nHello world.")
}
