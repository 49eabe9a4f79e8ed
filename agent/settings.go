package agent

import (
	"context"
	"sync"

	"github.com/pibot/pibot/llm"
)

// settings holds an agent's configuration; the model and thinking level
// may change while a run is active. It is safe for concurrent use.
type settings struct {
	mu  sync.Mutex
	cfg Config
}

// get returns a copy of the configuration.
func (s *settings) get() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// model returns the current model.
func (s *settings) model() llm.Model {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Model
}

// setThinking changes the thinking level from the next model call on.
func (s *settings) setThinking(l llm.ThinkingLevel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Thinking = l
}

// hooks returns the configured hooks.
func (s *settings) hooks() Hooks {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Hooks
}

// now returns the current time for a message timestamp.
func (s *settings) now() int64 {
	s.mu.Lock()
	now := s.cfg.Now
	s.mu.Unlock()
	return now().UnixMilli()
}

// contextWindow returns the current model's context window, 0 without a
// model.
func (s *settings) contextWindow() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Model == nil {
		return 0
	}
	return s.cfg.Model.Info().ContextWindow
}

// failureMessage is the synthetic assistant message pi's Agent records
// when the loop itself fails.
func (s *settings) failureMessage(ctx context.Context, err error) llm.Message {
	model := s.model()
	m := llm.Message{
		Role:         llm.RoleAssistant,
		Content:      []llm.Content{llm.TextBlock("")},
		StopReason:   llm.StopError,
		ErrorMessage: err.Error(),
		Timestamp:    s.now(),
	}
	if model != nil {
		info := model.Info()
		m.API, m.Provider, m.Model = info.API, info.Provider, info.ID
	}
	if ctx.Err() != nil {
		m.StopReason = llm.StopAborted
	}
	return m
}

// lifecycle says whether a run is active and holds what stops it. It is
// safe for concurrent use.
type lifecycle struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelCauseFunc
	wd      *watchdog // the active run's limits
}

// begin marks a run active under the limits of cfg and returns its
// context and watchdog, or ErrRunning if a run is active already.
func (l *lifecycle) begin(ctx context.Context, cfg Watchdog) (context.Context, *watchdog, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		return nil, nil, ErrRunning
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	l.running = true
	l.cancel = cancel
	l.wd = startWatchdog(cfg, cancel)
	return runCtx, l.wd, nil
}

// end stops the active run's watchdog and context and marks it over.
func (l *lifecycle) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wd.stop()
	if l.cancel != nil {
		l.cancel(nil)
	}
	l.running = false
	l.cancel = nil
	l.wd = nil
}

// abort cancels the active run's context, if any.
func (l *lifecycle) abort() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		l.cancel(nil)
	}
}

// active reports whether a run is active.
func (l *lifecycle) active() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}
