package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/pibot/pibot/llm"
)

// Default timeouts. Slow reasoning models decide them: OpenAI's Chat
// Completions sends nothing while a reasoning model thinks, a local
// server sends nothing while it loads a model or reads a long prompt,
// and the Responses API goes quiet between events while the model
// reasons without a summary. Minutes of silence are normal there, so the
// defaults only catch a provider that has really stopped.
const (
	// DefaultConnect bounds DNS, TCP and TLS until a connection is ready.
	DefaultConnect = 30 * time.Second
	// DefaultFirstByte bounds the wait from sending the request to the
	// first stream event (or to the headers, for a non-stream reply).
	DefaultFirstByte = 10 * time.Minute
	// DefaultIdle bounds the silence between two stream events. Once a
	// stream has begun, every API pibot speaks keeps sending while the
	// model works (tokens, Anthropic's pings, the Responses API's
	// reasoning summaries, which pibot asks for, keep-alive comments):
	// two minutes of nothing is a provider that stopped. (It was five
	// minutes, and with every stall retried a hung provider held a
	// conversation for twenty.)
	DefaultIdle = 2 * time.Minute
)

// Timeouts bound the phases of one model call; a zero field means its
// default.
type Timeouts struct {
	Connect   time.Duration
	FirstByte time.Duration
	Idle      time.Duration
}

// WithDefaults fills the zero fields.
func (t Timeouts) WithDefaults() Timeouts {
	if t.Connect <= 0 {
		t.Connect = DefaultConnect
	}
	if t.FirstByte <= 0 {
		t.FirstByte = DefaultFirstByte
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdle
	}
	return t
}

// Phase names the timeout that fired, as its config key does.
type Phase string

// Phases of a model call.
const (
	PhaseConnect   Phase = "connect"
	PhaseFirstByte Phase = "first_byte"
	PhaseIdle      Phase = "idle"
)

// TimeoutError is a model call cut by one of its Timeouts. Its text names
// the timeout, how long was waited and the setting to raise.
type TimeoutError struct {
	Provider string
	Phase    Phase
	After    time.Duration
}

func (e *TimeoutError) Error() string {
	key := fmt.Sprintf("providers.%s.timeouts.%s", e.Provider, e.Phase)
	switch e.Phase {
	case PhaseConnect:
		return fmt.Sprintf("timed out: no connection to the provider after %s (%s); check base_url and the network, or raise %s", e.After, key, key)
	case PhaseFirstByte:
		return fmt.Sprintf("%s for %s after the request (%s); raise %s if this model thinks for long", llm.SilenceText, e.After, key, key)
	default:
		return fmt.Sprintf("%s for %s in the middle of the answer (%s); raise %s if this model thinks for long", llm.StallText, e.After, key, key)
	}
}

// Timeout reports true, like the net package's timeout errors.
func (e *TimeoutError) Timeout() bool { return true }

// Retryable reports whether the attempt may be repeated at once without
// telling the user: only a connect timeout, which costs seconds. A first
// byte or idle timeout has already cost minutes; it ends the call and the
// agent's visible auto-retry decides.
func (e *TimeoutError) Retryable() bool { return e.Phase == PhaseConnect }

// WithTimeouts returns a client that sends through hc (http.DefaultClient
// when nil) with t applied to every request; provider names the provider
// in errors.
func WithTimeouts(hc *http.Client, provider string, t Timeouts) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &timeoutTransport{base: base, provider: provider, t: t.WithDefaults()}
	return &c
}

type timeoutTransport struct {
	base     http.RoundTripper
	provider string
	t        Timeouts
}

// RoundTrip runs the connect phase until the transport has a connection,
// then the first-byte phase; the body keeps watching (see watchedBody).
func (tt *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{provider: tt.provider, cancel: cancel}
	w.arm(PhaseConnect, tt.t.Connect)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { w.advance(PhaseConnect, PhaseFirstByte, tt.t.FirstByte) },
	})
	resp, err := tt.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		w.stop()
		cancel(nil)
		if te := w.err(); te != nil {
			return nil, te
		}
		return nil, err
	}
	// A transport that reports no connection still got an answer.
	w.advance(PhaseConnect, PhaseFirstByte, tt.t.FirstByte)
	sse := isSSE(resp.Header.Get("Content-Type"))
	if !sse {
		// Headers are the first byte of a non-stream reply; its body only
		// has to keep coming.
		w.advance(PhaseFirstByte, PhaseIdle, tt.t.Idle)
	}
	resp.Body = &watchedBody{rc: resp.Body, w: w, sse: sse, idle: tt.t.Idle}
	return resp, nil
}

func isSSE(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// watch is one request's timer. Events only record the time; the timer
// checks on expiry whether the silence really lasted, so a busy stream
// costs no timer operations.
type watch struct {
	provider string
	cancel   context.CancelCauseFunc

	mu    sync.Mutex
	phase Phase
	limit time.Duration
	since time.Time
	timer *time.Timer
	fired *TimeoutError
	done  bool
}

// arm starts phase p with limit d.
func (w *watch) arm(p Phase, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armLocked(p, d)
}

func (w *watch) armLocked(p Phase, d time.Duration) {
	if w.done || w.fired != nil {
		return
	}
	w.phase, w.limit, w.since = p, d, time.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.check)
		return
	}
	w.timer.Reset(d)
}

// advance moves from phase from to phase to; it does nothing in any other
// phase.
func (w *watch) advance(from, to Phase, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.phase == from {
		w.armLocked(to, d)
	}
}

// touch restarts the current phase's wait.
func (w *watch) touch() {
	w.mu.Lock()
	w.since = time.Now()
	w.mu.Unlock()
}

func (w *watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.fired != nil {
		return
	}
	if left := w.limit - time.Since(w.since); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.fired = &TimeoutError{Provider: w.provider, Phase: w.phase, After: w.limit}
	w.cancel(w.fired)
}

func (w *watch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// err returns the timeout that fired, or nil.
func (w *watch) err() *TimeoutError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

// watchedBody reports progress to its watch: for an event stream, every
// complete event (a block ended by a blank line, keep-alive comments
// included) ends the first-byte phase or restarts the idle wait; for any
// other body every read does. A read cut by a timeout fails with the
// *TimeoutError.
type watchedBody struct {
	rc   io.ReadCloser
	w    *watch
	sse  bool
	idle time.Duration

	lineStart bool // the last byte ended a line
	afterCR   bool // the last byte was '\r'
	closeOnce sync.Once
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		switch {
		case !b.sse:
			b.w.touch()
		case b.events(p[:n]):
			b.w.advance(PhaseFirstByte, PhaseIdle, b.idle)
			b.w.touch()
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		if te := b.w.err(); te != nil {
			return n, te
		}
	}
	return n, err
}

// events scans p for event ends and reports whether one passed.
func (b *watchedBody) events(p []byte) bool {
	ended := false
	for _, c := range p {
		switch c {
		case '\n':
			if b.afterCR {
				b.afterCR = false
				continue
			}
			ended = ended || b.lineStart
			b.lineStart = true
		case '\r':
			ended = ended || b.lineStart
			b.lineStart, b.afterCR = true, true
		default:
			b.lineStart, b.afterCR = false, false
		}
	}
	return ended
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.closeOnce.Do(func() {
		b.w.stop()
		b.w.cancel(nil)
	})
	return err
}
