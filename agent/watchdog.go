package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pibot/pibot/llm"
)

// Watchdog bounds a run: MaxRun is its wall-clock limit, MaxIdle the
// longest it may go without an event (a streamed token, a tool starting,
// updating or ending). Zero turns a limit off. A limit that trips cancels
// the run's context with a *StopError as the cause: the model call and
// tools stop as on Abort, and the run's last assistant message becomes an
// error naming the limit (so a chat shows it), without an automatic retry.
type Watchdog struct {
	MaxRun  time.Duration
	MaxIdle time.Duration
	// OnStop, when set, is called once per stopped run with the limit's
	// configuration key ("agent.max_run" or "agent.max_idle"), for metrics.
	OnStop func(key string)
}

// StopError is the cause of a run stopped by its Watchdog.
type StopError struct {
	// Key is the limit's configuration key.
	Key   string
	Limit time.Duration
}

func (e *StopError) Error() string {
	if e.Key == "agent.max_idle" {
		return fmt.Sprintf("Stopped: nothing came from the model or a tool for %s (agent.max_idle).", e.Limit)
	}
	return fmt.Sprintf("Stopped: this run reached its limit of %s (agent.max_run).", e.Limit)
}

// watchdog enforces a Watchdog on one run. Its methods are safe on a nil
// watchdog (no limits).
type watchdog struct {
	cfg    Watchdog
	cancel context.CancelCauseFunc
	run    *time.Timer
	idle   *time.Timer

	mu      sync.Mutex
	stopped bool       // the run ended; late timers do nothing
	cause   *StopError // set when a limit tripped
}

// startWatchdog arms cfg's timers for a run cancelled by cancel; it
// returns nil when cfg has no limit.
func startWatchdog(cfg Watchdog, cancel context.CancelCauseFunc) *watchdog {
	if cfg.MaxRun <= 0 && cfg.MaxIdle <= 0 {
		return nil
	}
	w := &watchdog{cfg: cfg, cancel: cancel}
	if cfg.MaxRun > 0 {
		w.run = time.AfterFunc(cfg.MaxRun, func() { w.trip("agent.max_run", cfg.MaxRun) })
	}
	if cfg.MaxIdle > 0 {
		w.idle = time.AfterFunc(cfg.MaxIdle, func() { w.trip("agent.max_idle", cfg.MaxIdle) })
	}
	return w
}

// trip stops the run for the limit key, once.
func (w *watchdog) trip(key string, limit time.Duration) {
	w.mu.Lock()
	if w.stopped || w.cause != nil {
		w.mu.Unlock()
		return
	}
	w.cause = &StopError{Key: key, Limit: limit}
	cause := w.cause
	w.mu.Unlock()
	// Counted before the run sees the cancellation, so that the count is
	// there by the time the run has ended.
	if w.cfg.OnStop != nil {
		w.cfg.OnStop(key)
	}
	w.cancel(cause)
}

// kick restarts the idle timer: the run just produced an event.
func (w *watchdog) kick() {
	if w == nil || w.idle == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && w.cause == nil {
		w.idle.Reset(w.cfg.MaxIdle)
	}
}

// stop disarms the timers when the run ends.
func (w *watchdog) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	if w.run != nil {
		w.run.Stop()
	}
	if w.idle != nil {
		w.idle.Stop()
	}
}

// tripped returns the limit that stopped the run, or nil.
func (w *watchdog) tripped() *StopError {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cause
}

// explain turns an assistant message that ended because a limit cancelled
// the run into an error message naming the limit.
func (w *watchdog) explain(m llm.Message) llm.Message {
	cause := w.tripped()
	if cause == nil || m.Role != llm.RoleAssistant || (m.StopReason != llm.StopAborted && m.StopReason != llm.StopError) {
		return m
	}
	m.StopReason = llm.StopError
	m.ErrorMessage = cause.Error()
	return m
}
