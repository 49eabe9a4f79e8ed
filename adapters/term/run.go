package term

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
)

// maxLine is the longest input line.
const maxLine = 1 << 20

// deadliner is an input whose blocked Read can be interrupted (an
// *os.File on a pollable descriptor, a net.Conn).
type deadliner interface {
	SetReadDeadline(t time.Time) error
}

// Run reads the user's lines and hands them to sink, one at a time: a line
// is delivered only after the previous one was accepted. It returns nil at
// the end of the input, after the last line was handed over, or when ctx
// ends. If ctx ends while a read is blocked and the input cannot be
// interrupted (a terminal's stdin), that read finishes in the background
// when the next line arrives or the input is closed.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	if sink == nil {
		return fmt.Errorf("term: run: nil sink")
	}
	lines := make(chan string)
	quit := make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		if a.edit {
			readDone <- a.readEdited(lines, quit)
			close(lines)
			return
		}
		sc := bufio.NewScanner(a.in)
		sc.Buffer(make([]byte, 0, 4096), maxLine)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-quit:
				readDone <- nil
				return
			}
		}
		readDone <- sc.Err()
		close(lines)
	}()

	var pending []string // lines continued with a trailing "\"
	for {
		select {
		case <-ctx.Done():
			close(quit)
			if d, ok := a.in.(deadliner); ok && d.SetReadDeadline(time.Now()) == nil {
				<-readDone
			}
			return nil
		case line, ok := <-lines:
			if !ok {
				if len(pending) > 0 {
					a.handle(ctx, sink, strings.Join(pending, "\n"))
				}
				if err := <-readDone; err != nil {
					return fmt.Errorf("term: read: %w", err)
				}
				return nil
			}
			line = strings.TrimSuffix(line, "\r")
			if cont, ok := strings.CutSuffix(line, `\`); ok {
				pending = append(pending, cont)
				continue
			}
			a.handle(ctx, sink, strings.Join(append(pending, line), "\n"))
			pending = nil
		}
	}
}

// handle turns one input into an inbound event and delivers it; a refusal
// is printed, so the user knows to send it again.
func (a *Adapter) handle(ctx context.Context, sink chat.Sink, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	conv := Conv()
	in := chat.Inbound{
		Kind:      chat.KindMessage,
		Conv:      conv,
		User:      chat.User{ID: UserID, Name: "you"},
		Text:      text,
		Mentioned: true,
		Time:      time.Now().UTC(),
	}
	a.mu.Lock()
	digits := strings.TrimSpace(text)
	n, err := strconv.Atoi(digits)
	isKey := err == nil && digits[0] != '+' && digits[0] != '-' && len(a.keys) > 0
	if isKey && (n < 1 || n > len(a.keys)) {
		show := a.hidePrompt()
		a.newLine()
		a.note(fmt.Sprintf("no button %d: type a number from 1 to %d", n, len(a.keys)))
		show()
		a.mu.Unlock()
		return
	}
	var pressed chat.Button
	if isKey {
		pressed = a.keys[n-1]
		in.Kind = chat.KindAction
		in.Text = ""
		in.Msg = a.keyMsg
		in.Action = &chat.Action{Data: pressed.ID, Msg: a.keyMsg}
		a.keys = nil // one press per set of buttons
	}
	keyMsg := a.keyMsg
	a.mu.Unlock()

	if isKey {
		in.DedupKey = "term:" + a.newID("a")
		in.Interaction = &chat.Interaction{Platform: Platform, ID: in.DedupKey, Conv: conv, Msg: keyMsg, User: UserID}
	} else {
		in.Msg = chat.MsgRef{Conv: conv, ID: a.newID("u")}
		in.DedupKey = "term:" + in.Msg.ID
		in.Command = chat.ParseCommand(text, "")
	}
	if err := sink(ctx, in); err != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		defer a.hidePrompt()()
		a.newLine()
		if isKey {
			a.note(fmt.Sprintf("! %q not delivered: %v — press it again", pressed.Label, err))
			if a.keys == nil && a.keyMsg == keyMsg {
				if s := a.msgs[keyMsg.ID]; s != nil {
					for _, row := range s.buttons {
						a.keys = append(a.keys, row...)
					}
				}
			}
		} else {
			a.note(fmt.Sprintf("! not delivered: %v — send it again", err))
		}
	}
}
