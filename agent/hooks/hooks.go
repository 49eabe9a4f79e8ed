package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The events a hook can subscribe to.
const (
	EventInput            = "input"
	EventToolCall         = "tool_call"
	EventToolResult       = "tool_result"
	EventBeforeAgentStart = "before_agent_start"
	EventAgentEnd         = "agent_end"
)

// Events lists every event, in the order of a run.
var Events = []string{EventInput, EventBeforeAgentStart, EventToolCall, EventToolResult, EventAgentEnd}

// DefaultTimeout bounds a hook's answer when Hook.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxAnswer bounds a hook's stdout; maxStderr what is kept of its stderr
// for the log.
const (
	maxAnswer = 1 << 20
	maxStderr = 2 << 10
)

// Hook is one configured hook (hooks.NAME).
type Hook struct {
	Name string
	// Command is the executable; Args its arguments.
	Command string
	Args    []string
	// Events are the events it receives.
	Events []string
	// Timeout bounds one answer (DefaultTimeout when zero); the process
	// and its children are killed when it passes.
	Timeout time.Duration
	// FailClosed refuses the event's action when the hook fails; by
	// default a failing hook is skipped.
	FailClosed bool
	// Dir is the working directory (the workspace); Env the environment
	// (nil: pibot's own, already scrubbed of secrets).
	Dir string
	Env []string
}

// Runner runs the hooks. Its methods are safe for concurrent use; hooks
// run one after another in the order given, each seeing what the earlier
// ones changed.
type Runner struct {
	hooks []Hook
	log   *slog.Logger
}

// New returns a runner of hooks; log gets one line per failure.
func New(hooks []Hook, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{hooks: slices.Clone(hooks), log: log}
}

// Has reports whether some hook receives event.
func (r *Runner) Has(event string) bool {
	if r == nil {
		return false
	}
	for _, h := range r.hooks {
		if slices.Contains(h.Events, event) {
			return true
		}
	}
	return false
}

// FailedError is a fail-closed hook's failure.
type FailedError struct {
	Hook  string
	Event string
	Err   error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("hook %s failed on %s: %v", e.Hook, e.Event, e.Err)
}

func (e *FailedError) Unwrap() error { return e.Err }

// each asks every hook subscribed to event with its answer. A
// failing hook is logged; a fail-closed one ends the loop with a
// *FailedError. use returning more=false stops the loop (the event was
// decided).
func (r *Runner) each(ctx context.Context, event string, req func() any, use func(h Hook, ans answer) (more bool, err error)) error {
	if r == nil {
		return nil
	}
	for _, h := range r.hooks {
		if !slices.Contains(h.Events, event) {
			continue
		}
		ans, err := h.call(ctx, event, req())
		if err == nil {
			var more bool
			more, err = use(h, ans)
			if err == nil && !more {
				return nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("hooks: %s: %w", event, context.Cause(ctx))
			}
			r.log.Warn("hook failed", "hook", h.Name, "event", event, "fail", failMode(h), "err", err)
			if h.FailClosed {
				return &FailedError{Hook: h.Name, Event: event, Err: err}
			}
		}
	}
	return nil
}

func failMode(h Hook) string {
	if h.FailClosed {
		return "closed"
	}
	return "open"
}

// answer is a hook's reply; which fields count depends on the event.
type answer struct {
	Action  string          `json:"action"`
	Text    *string         `json:"text"`
	Reply   string          `json:"reply"`
	Reason  string          `json:"reason"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"`
	IsError *bool           `json:"is_error"`
	Context string          `json:"context"`
}

// call runs h for one event: the request as one JSON line on stdin, the
// answer as at most one JSON line on stdout (none: {}).
func (h Hook) call(ctx context.Context, event string, req any) (answer, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return answer{}, fmt.Errorf("encode %s: %w", event, err)
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer within %s", timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Command, h.Args...)
	cmd.Dir, cmd.Env = h.Dir, h.Env
	cmd.SysProcAttr = groupAttr()
	cmd.Cancel = func() error {
		// The whole process group: a shell's children too.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = time.Second
	cmd.Stdin = bytes.NewReader(append(line, '\n'))
	var out, stderr capped
	out.max, stderr.max = maxAnswer, maxStderr
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		return answer{}, context.Cause(ctx)
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return answer{}, fmt.Errorf("%w: %s", err, msg)
		}
		return answer{}, err
	}
	if out.over {
		return answer{}, fmt.Errorf("answer longer than %d bytes", maxAnswer)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	var ans answer
	if first == "" {
		return ans, nil
	}
	if err := json.Unmarshal([]byte(first), &ans); err != nil {
		return answer{}, fmt.Errorf("answer is not a JSON object: %w", err)
	}
	return ans, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); len(p) > room {
		c.over = true
		c.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

var _ io.Writer = (*capped)(nil)

// errAction is an answer whose action the event does not know.
func errAction(event, action string) error {
	return errors.New("unknown action " + strconv.Quote(action) + " for " + event)
}
