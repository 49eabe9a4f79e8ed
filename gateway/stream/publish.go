package stream

import (
	"context"
	"time"
	"unicode/utf8"
)

// publisher is the loop's side of a Controller: each turn it refreshes
// the typing line and shows the reply on the surface when that is due,
// keeping what it has shown and the wait for the first post.
type publisher struct {
	r         *reply
	verbosity Verbosity
	now       func() time.Time
	surf      surface
	pace      *pacer
	msgs      *messages
	typing    indicator // used by the publishing goroutine only (and by finish once it stopped)

	// Guarded by r.mu:
	sentVersion uint64 // version fully shown
	// waitsFirst: show's last call returned the wait for the first post,
	// so the loop wakes by itself when it is due.
	waitsFirst bool
}

// step is one turn of the loop: it refreshes the typing line and publishes
// the reply when that is due, and returns how long the loop may sleep
// before the next turn; -1 means until content changes.
func (p *publisher) step(ctx context.Context) time.Duration {
	if d := p.pace.pausedFor(p.now()); d > 0 {
		return d
	}
	p.r.mu.Lock()
	run := p.r.doc.running()
	status := statusLine(p.r.doc.status, run, p.typing.always && !p.r.firstAt.IsZero())
	p.r.mu.Unlock()
	want := run != nil || p.typing.always || !p.surf.showsProgress()
	return earliest(p.typing.tick(ctx, want, status, p.now()), p.show(ctx))
}

// show publishes the surface's view of the reply if it is due and returns
// when to look again.
func (p *publisher) show(ctx context.Context) time.Duration {
	p.r.mu.Lock()
	now := p.now()
	running := p.r.doc.running() != nil
	p.waitsFirst = false
	switch {
	case p.pace.onlyFinal() || p.r.firstAt.IsZero():
		p.r.mu.Unlock()
		return -1
	case p.pace.pausedFor(now) > 0:
		p.r.mu.Unlock()
		return p.pace.pausedFor(now)
	case p.r.version == p.sentVersion && !running:
		p.r.mu.Unlock()
		return -1
	}
	if d := p.pace.dueIn(now); d > 0 {
		p.r.mu.Unlock()
		return d
	}
	view := p.surf.view(&p.r.doc, p.verbosity, now)
	version := p.r.version
	if !p.msgs.shown() {
		if view == "" {
			p.sentVersion = version
			p.r.mu.Unlock()
			return -1
		}
		if wait := p.r.firstAt.Add(firstPostDelay).Sub(now); wait > 0 && utf8.RuneCountInString(view) < firstPostChars {
			p.waitsFirst = true
			p.r.mu.Unlock()
			return wait
		}
	}
	p.r.mu.Unlock()

	ok := p.surf.publish(ctx, view)

	after := p.pace.published(p.now())
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if ok {
		p.sentVersion = version
	}
	if p.pace.onlyFinal() || (p.r.version == p.sentVersion && !running) {
		return -1
	}
	return after
}
