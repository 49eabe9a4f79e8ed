package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
//
// The dedupe's calls too: the first Seen (alone, or in SeenReserve's
// pipeline) or Commit after LoseNextSeen records its key in Redis and its
// answer is lost (run again with Rerun); while FailForgets is set, Dedupe.Forget
// fails before it reaches Redis, and while FailAdmits is set, so does
// every admission (Admit, with Take or not).
type LostAnswers struct {
	Rerun bool

	mu          sync.Mutex
	failTakes   bool
	takesError  int
	loseAdmit   bool
	admitsLost  int
	failAcks    bool
	acksError   int
	loseSeen    bool
	seensLost   int
	failForgets bool
	forgetsFail int
	forgets     int
	failAdmits  bool
	admitsFail  int
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

// LoseNextSeen loses the answer of the next Seen or Commit that records
// its key.
func (h *LostAnswers) LoseNextSeen() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loseSeen = true
}

// FailForgets makes Dedupe.Forget fail (on) or pass again.
func (h *LostAnswers) FailForgets(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failForgets = on
}

// FailAdmits makes every admission fail before it reaches Redis (on) or
// pass again.
func (h *LostAnswers) FailAdmits(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failAdmits = on
}

// DedupeCounts returns the Seens (and Commits) whose answers were lost, the Forgets
// failed and the Forgets that reached Redis and answered, so far.
func (h *LostAnswers) DedupeCounts() (seensLost, forgetsFailed, forgotten int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seensLost, h.forgetsFail, h.forgets
}

// DialHook passes dials through.
func (h *LostAnswers) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook loses the answer of a Seen in a pipeline
// (SeenReserve) as LoseNextSeen asks; the rest passes through.
func (h *LostAnswers) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if scriptKind(cmd) == "seen" && cmd.Err() == nil && h.takeSeenLoss() {
				if h.Rerun {
					// Run again, as a client retrying it would.
					_ = next(ctx, []redis.Cmder{cmd})
					continue
				}
				cmd.SetErr(errors.New("redistest: answer lost"))
			}
		}
		return err
	}
}

// takeSeenLoss reports whether a Seen that ran is to lose its answer
// (LoseNextSeen), and counts it.
func (h *LostAnswers) takeSeenLoss() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loseSeen {
		return false
	}
	h.loseSeen = false
	h.seensLost++
	return true
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
		failAdmit := (kind == "admit" || kind == "admit-only") && h.failAdmits
		if failAdmit {
			h.admitsFail++
		}
		failForget := kind == "forget" && h.failForgets
		if failForget {
			h.forgetsFail++
		}
		h.mu.Unlock()
		switch {
		case failAdmit:
			err := errors.New("redistest: admission not sent")
			cmd.SetErr(err)
			return err
		case failForget:
			err := errors.New("redistest: forget not sent")
			cmd.SetErr(err)
			return err
		case kind == "forget":
			err := next(ctx, cmd)
			if cmd.Err() == nil {
				h.mu.Lock()
				h.forgets++
				h.mu.Unlock()
			}
			return err
		case kind == "seen" || kind == "commit":
			err := next(ctx, cmd)
			// A script Redis does not have yet did not run: the client
			// sends its source next, and that one loses its answer.
			if cmd.Err() != nil || !h.takeSeenLoss() {
				return err
			}
			if h.Rerun {
				return next(ctx, cmd)
			}
			err = errors.New("redistest: answer lost")
			cmd.SetErr(err)
			return err
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
// fourth argument "ack"), the admission script run with Take ("admit":
// 8 keys, its eleventh argument "take") or without ("admit-only"), and
// the dedupe's Seen ("seen": 1 key, a dedupe key "…{inbox}:d:…", and 2
// arguments), Commit ("commit": the same key, 1 argument) and Forget
// ("forget": the same key, no arguments) from any other command.
func scriptKind(cmd redis.Cmder) string {
	args := cmd.Args()
	if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(args) < 3 {
		return ""
	}
	switch fmt.Sprint(args[2]) {
	case "1":
		if len(args) < 3+1 || !strings.Contains(fmt.Sprint(args[3]), "{inbox}:d:") {
			return ""
		}
		switch len(args) {
		case 3 + 1 + 2:
			return "seen"
		case 3 + 1 + 1:
			return "commit"
		case 3 + 1:
			return "forget"
		}
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
		return "admit-only"
	}
	return ""
}
