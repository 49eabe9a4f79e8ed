package gateway

import (
	"context"
	"strings"

	"github.com/pibot/pibot/chat"
)

// Button id prefixes (ids stay within chat.MaxButtonID).
const (
	btnApprove = "ap:" // ap:<approval id>:<decision>
	btnJump    = "tj:" // tj:<entry id>: move the head there (/tree)
	btnFork    = "fk:" // fk:<entry id>: move the head to its parent (/fork)
)

// press answers a button press: first the toast (the platform shows a
// spinner until then), then the work the press started.
func (cs *commands) press(ctx context.Context, in chat.Inbound) {
	data := in.Action.Data
	toast := "Unknown button."
	var then func()
	switch {
	case strings.HasPrefix(data, btnApprove):
		rest := strings.TrimPrefix(data, btnApprove)
		if id, d, ok := strings.Cut(rest, ":"); ok {
			toast, then = cs.approvals.decide(ctx, in, id, d)
		}
	case strings.HasPrefix(data, btnJump), strings.HasPrefix(data, btnFork):
		toast = cs.jump(ctx, in, data)
	}
	cs.chat.answer(ctx, in, toast)
	if then != nil {
		then()
	}
}
