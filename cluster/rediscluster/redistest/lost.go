package redistest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Hook is a go-redis hook, as RoundTrips and LostAnswers are: what a test
// that names no go-redis type adds to a client.
type Hook interface {
	redis.Hook
}

// LostAnswers is a go-redis hook that loses the inbox's answers: while
// FailTakes is set, the inbox's takes (Consume, Claim) fail before they
// reach Redis, and while FailAcks is set, so do its acknowledgements
// (Ack); the first admission that takes items (Admit with Take)
// after LoseNextAdmit runs in Redis and its answer is lost, and the
// client then runs it again (Rerun, as go-redis does after a read
// timeout) or the caller gets an error.
type LostAnswers struct {
	Rerun bool

	mu         sync.Mutex
	failTakes  bool
	takesError int
	loseAdmit  bool
	admitsLost int
	failAcks   bool
	acksError  int
}

var _ Hook = (*LostAnswers)(nil)

// FailTakes makes the inbox's takes fail (on) or pass again.
func (h *LostAnswers) FailTakes(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failTakes = on
}

// FailAcks makes the inbox's acknowledgements fail (on) or pass again.
func (h *LostAnswers) FailAcks(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failAcks = on
}

// AcksFailed returns how many acknowledgements failed so far.
func (h *LostAnswers) AcksFailed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acksError
}

// LoseNextAdmit loses the answer of the next admission that takes.
func (h *LostAnswers) LoseNextAdmit() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loseAdmit = true
}

// Counts returns the takes failed and the admissions' answers lost so
// far.
func (h *LostAnswers) Counts() (takesFailed, admitsLost int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.takesError, h.admitsLost
}

// DialHook passes dials through.
func (h *LostAnswers) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook passes pipelines through.
func (h *LostAnswers) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook fails takes and loses an admission's answer as set.
func (h *LostAnswers) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		kind := scriptKind(cmd)
		failTake := kind == "take" && h.failTakes
		if failTake {
			h.takesError++
		}
		failAck := kind == "ack" && h.failAcks
		if failAck {
			h.acksError++
		}
		lose := kind == "admit" && h.loseAdmit
		if lose {
			h.loseAdmit = false
		}
		h.mu.Unlock()
		switch {
		case failTake:
			err := errors.New("redistest: take not sent")
			cmd.SetErr(err)
			return err
		case failAck:
			err := errors.New("redistest: ack not sent")
			cmd.SetErr(err)
			return err
		case lose:
			err := next(ctx, cmd) // it ran; its answer is lost
			h.mu.Lock()
			h.admitsLost++
			h.mu.Unlock()
			if h.Rerun {
				return next(ctx, cmd)
			}
			if err == nil {
				err = errors.New("redistest: answer lost")
			}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// scriptKind tells the inbox's take script ("take": 2 keys, its second
// argument "consume" or "claim"), its end script acknowledging an item ("ack": 5 keys, its
// fourth argument "ack") and the admission script run with Take ("admit":
// 8 keys, its eleventh argument "take") from any other command.
func scriptKind(cmd redis.Cmder) string {
	args := cmd.Args()
	if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(args) < 3 {
		return ""
	}
	switch fmt.Sprint(args[2]) {
	case "2":
		if len(args) > 3+2+1 {
			if m := fmt.Sprint(args[3+2+1]); m == "consume" || m == "claim" {
				return "take"
			}
		}
	case "5":
		if len(args) > 3+5+3 && fmt.Sprint(args[3+5+3]) == "ack" {
			return "ack"
		}
	case "8":
		if len(args) > 3+8+10 && fmt.Sprint(args[3+8+10]) == "take" {
			return "admit"
		}
	}
	return ""
}
