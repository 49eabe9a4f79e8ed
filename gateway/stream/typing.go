package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/pibot/pibot/chat"
)

// indicator keeps a reply's typing or status line alive: before the first
// visible output, while a tool runs and, on an append-only surface, for the
// whole reply. Only the publishing goroutine uses it.
type indicator struct {
	typer   chat.Typer // nil: the adapter has none
	conv    chat.ConvRef
	refresh time.Duration
	pace    *pacer
	log     *slog.Logger
	// prompt sends a changed status at once instead of at the next
	// refresh: the status line is where the reply reports its progress.
	prompt bool
	// always keeps the status set for the whole reply, not only before
	// the first output and while a tool runs (chat.Caps.StatusLine).
	always bool

	on   bool // a status was set and not cleared
	last time.Time
	text string
}

// tick sets status if want and a refresh is due (or, with prompt, the
// status changed). It returns when to look again, -1 for never.
func (i *indicator) tick(ctx context.Context, want bool, status string, now time.Time) time.Duration {
	if i.typer == nil || i.refresh <= 0 || !want {
		return -1
	}
	if due := i.last.Add(i.refresh); i.on && now.Before(due) && (!i.prompt || status == i.text) {
		return due.Sub(now)
	}
	i.on, i.last, i.text = true, now, status
	if err := i.typer.SetStatus(ctx, i.conv, status); err != nil {
		i.pace.limited(err)
		i.log.Debug("stream: typing", "err", err)
	}
	return i.refresh
}

// clear clears a status the reply set, unless the reply is paused by a
// rate limit.
func (i *indicator) clear(ctx context.Context, now time.Time) {
	on := i.on
	i.on = false
	if !on || i.pace.pausedFor(now) > 0 {
		return
	}
	if err := i.typer.SetStatus(ctx, i.conv, ""); err != nil {
		i.log.Debug("stream: clear status", "err", err)
	}
}

// statusLine is what the status line says: the reply's status, else the
// running tool, else that the model is writing (once the reply shows
// something) or thinking.
func statusLine(status string, run *toolRun, writing bool) string {
	switch {
	case status != "":
		return status
	case run != nil:
		return "running " + run.name + "…"
	case writing:
		return "writing…"
	default:
		return "thinking…"
	}
}
