package term

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/pibot/pibot/chat"
)

// OpenStream starts a live reply. On a live terminal every Update redraws
// the reply in place; otherwise nothing is printed until Finish prints the
// final text, so a pipe or a file gets each answer once.
func (a *Adapter) OpenStream(ctx context.Context, conv chat.ConvRef, opts chat.StreamOptions) (chat.Stream, error) {
	if err := checkConv(conv); err != nil {
		return nil, fmt.Errorf("term: open stream: %w", err)
	}
	return &stream{a: a, ref: chat.MsgRef{Conv: conv, ID: a.newID("b")}}, nil
}

// stream is one live reply on the terminal.
type stream struct {
	a   *Adapter
	ref chat.MsgRef

	mu   sync.Mutex
	done bool
}

// Update shows markdown as the reply so far (on a live terminal only).
func (s *stream) Update(ctx context.Context, markdown string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return fmt.Errorf("term: stream update: stream ended")
	}
	if !s.a.live {
		return nil
	}
	s.a.show(s.ref, chat.Out{Markdown: markdown}, true)
	return nil
}

// Finish shows the final message, with its buttons, and ends the stream.
func (s *stream) Finish(ctx context.Context, final chat.Out) (chat.MsgRef, error) {
	if err := checkButtons(final.Buttons); err != nil {
		return chat.MsgRef{}, fmt.Errorf("term: stream finish: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return chat.MsgRef{}, fmt.Errorf("term: stream finish: stream ended")
	}
	s.done = true
	s.a.show(s.ref, final, false)
	return s.ref, nil
}

// Abort ends the stream and takes its text off a live terminal when it
// still ends the output.
func (s *stream) Abort(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streaming == s.ref.ID {
		a.streaming = ""
	}
	m := a.msgs[s.ref.ID]
	if m == nil {
		return nil
	}
	delete(a.msgs, s.ref.ID)
	if a.live && a.tail == s.ref.ID {
		cols, rows := a.termSize()
		if up := screenRows(m.text, cols); up < rows {
			defer a.hidePrompt()()
			a.raw(fmt.Sprintf("\r\x1b[%dA%s", up, ansiClearScreen))
			a.tail = ""
		}
	}
	return nil
}

// show prints the message ref (new) or brings it up to date: in place when
// it ends the output on a live terminal, else printed again. open says
// the stream goes on (a line the user sends meanwhile is shown above it).
func (a *Adapter) show(ref chat.MsgRef, m chat.Out, open bool) {
	text := strings.TrimRight(chat.Render(m.Markdown, a.dialect()), "\n")
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.hidePrompt()()
	if open {
		a.streaming = ref.ID
	} else if a.streaming == ref.ID {
		a.streaming = ""
	}
	s := a.msgs[ref.ID]
	if s == nil {
		a.printLocked(ref, &shown{markdown: m.Markdown, text: text, buttons: m.Buttons})
		return
	}
	switch {
	case s.text == text:
	case a.live && a.tail == ref.ID && a.redraw(s.text, text):
	default:
		a.newLine()
		a.write(text + "\n")
		a.tail = ref.ID
	}
	s.text, s.markdown = text, m.Markdown
	if !equalButtons(s.buttons, m.Buttons) {
		s.buttons = m.Buttons
		a.showButtons(ref, m.Buttons)
	}
}
