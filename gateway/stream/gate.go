package stream

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/pibot/pibot/chat"
)

// errSilenced is what a reply's platform call returns once the reply may
// no longer speak (Options.Allowed).
var errSilenced = errors.New("stream: the reply may no longer call the chat")

// gate lets a reply's platform calls through while Options.Allowed says
// so. Once it says no, no call goes out again, whatever it says later:
// the caller has lost the conversation (in cluster mode, another replica
// holds its session and answers). Every call the package makes to the
// platform passes it, checked at the moment of the call, so a tick that
// was due while the process was frozen cannot slip one out before the
// caller learns of its loss.
type gate struct {
	allowed func() bool // nil: always
	shut    atomic.Bool
}

// pass returns nil when a call may go out now, errSilenced otherwise.
func (g *gate) pass() error {
	if g.allowed == nil {
		return nil
	}
	if g.shut.Load() || !g.allowed() {
		g.shut.Store(true)
		return errSilenced
	}
	return nil
}

// platform is the adapter a reply calls, and what it can do beyond
// sending and editing, each behind the reply's gate (nil where the
// adapter cannot).
type platform struct {
	ad       chat.Adapter
	deleter  chat.Deleter
	typer    chat.Typer
	streamer chat.Streamer
}

// gated returns ad's calls behind g.
func gated(ad chat.Adapter, g *gate) platform {
	p := platform{ad: gatedAdapter{Adapter: ad, g: g}}
	if d, ok := ad.(chat.Deleter); ok {
		p.deleter = gatedDeleter{d: d, g: g}
	}
	if t, ok := ad.(chat.Typer); ok {
		p.typer = gatedTyper{t: t, g: g}
	}
	if s, ok := ad.(chat.Streamer); ok {
		p.streamer = gatedStreamer{s: s, g: g}
	}
	return p
}

type gatedAdapter struct {
	chat.Adapter
	g *gate
}

func (a gatedAdapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	if err := a.g.pass(); err != nil {
		return chat.MsgRef{}, err
	}
	return a.Adapter.Send(ctx, conv, m)
}

func (a gatedAdapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	if err := a.g.pass(); err != nil {
		return err
	}
	return a.Adapter.Edit(ctx, ref, m)
}

type gatedDeleter struct {
	d chat.Deleter
	g *gate
}

func (d gatedDeleter) Delete(ctx context.Context, ref chat.MsgRef) error {
	if err := d.g.pass(); err != nil {
		return err
	}
	return d.d.Delete(ctx, ref)
}

type gatedTyper struct {
	t chat.Typer
	g *gate
}

func (t gatedTyper) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if err := t.g.pass(); err != nil {
		return err
	}
	return t.t.SetStatus(ctx, conv, status)
}

type gatedStreamer struct {
	s chat.Streamer
	g *gate
}

func (s gatedStreamer) OpenStream(ctx context.Context, conv chat.ConvRef, opts chat.StreamOptions) (chat.Stream, error) {
	if err := s.g.pass(); err != nil {
		return nil, err
	}
	st, err := s.s.OpenStream(ctx, conv, opts)
	if err != nil {
		return nil, err
	}
	return gatedStream{st: st, g: s.g}, nil
}

type gatedStream struct {
	st chat.Stream
	g  *gate
}

func (s gatedStream) Update(ctx context.Context, markdown string) error {
	if err := s.g.pass(); err != nil {
		return err
	}
	return s.st.Update(ctx, markdown)
}

func (s gatedStream) Finish(ctx context.Context, final chat.Out) (chat.MsgRef, error) {
	if err := s.g.pass(); err != nil {
		return chat.MsgRef{}, err
	}
	return s.st.Finish(ctx, final)
}

func (s gatedStream) Abort(ctx context.Context) error {
	if err := s.g.pass(); err != nil {
		return err
	}
	return s.st.Abort(ctx)
}
