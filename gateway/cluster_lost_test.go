package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
)

// lostAnswers is a go-redis hook of one replica: while failTakes is set,
// its inbox takes (Consume, Claim) fail before they reach Redis; the next
// admission that takes items (Admit with Take) after loseAdmit runs in
// Redis and its answer is lost: the client runs it again (rerun, as
// go-redis does after a read timeout) or the caller gets an error.
type lostAnswers struct {
	rerun bool

	mu         sync.Mutex
	failTakes  bool
	takesError int // takes failed so far
	loseAdmit  bool
	admitsLost int
}

func (h *lostAnswers) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lostAnswers) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *lostAnswers) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		kind := scriptKind(cmd)
		failTake := kind == "take" && h.failTakes
		if failTake {
			h.takesError++
		}
		lose := kind == "admit" && h.loseAdmit
		if lose {
			h.loseAdmit = false
		}
		h.mu.Unlock()
		switch {
		case failTake:
			err := errors.New("lostAnswers: not sent")
			cmd.SetErr(err)
			return err
		case lose:
			err := next(ctx, cmd) // it ran; its answer is lost
			h.mu.Lock()
			h.admitsLost++
			h.mu.Unlock()
			if h.rerun {
				return next(ctx, cmd)
			}
			if err == nil {
				err = errors.New("lostAnswers: answer lost")
			}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// scriptKind tells the inbox's take script ("take": 3 keys, the first a
// stream) and the admission script run with Take ("admit": 8 keys, its
// eleventh argument "take") from any other command.
func scriptKind(cmd redis.Cmder) string {
	args := cmd.Args()
	if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(args) < 3 {
		return ""
	}
	switch fmt.Sprint(args[2]) {
	case "3":
		return "take"
	case "8":
		if len(args) > 3+8+10 && fmt.Sprint(args[3+8+10]) == "take" {
			return "admit"
		}
	}
	return ""
}

// TestClusterLostAnswerTakesAgain: replica A holds the session; replica
// B accepts a message (A's pump cannot take it: its takes fail), then
// A's own admission of a message takes both and its answer is lost after
// Redis ran it. A answers B's message and its own, promptly (the lease
// TTL is a minute: waiting for it to end fails the test), in the order
// accepted, and nothing twice. Before, the items sat in A's consumer's
// pending list until the lease ended: only its own message came back,
// with the client's run again.
func TestClusterLostAnswerTakesAgain(t *testing.T) {
	tests := []struct {
		name string
		// rerun: the client runs the admission again; else A refuses the
		// message, which the platform may deliver again (redeliver)
		// before A takes the key again: the copy comes with the lost
		// answer's items and is dropped.
		rerun, redeliver bool
	}{
		{"run again", true, false},
		{"refused", false, false},
		{"refused and delivered again", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rerun := tc.rerun
			h := &lostAnswers{rerun: rerun}
			model, adA, adB, dir := twoReplicas(t, redisReplica{leaseTTL: time.Minute, hook: h}, redisReplica{leaseTTL: time.Minute})
			clusterSay(t, adA, model, 0, "first") // A holds the session
			inject := func(ad *chattest.Adapter, n int, text string) error {
				in := benchMessage(adA.Platform(), 1, n, text)
				in.User, in.DedupKey = chat.User{ID: "u1", Name: "User"}, "lost:"+text
				return ad.Inject(t.Context(), in)
			}
			h.mu.Lock()
			h.failTakes = true
			h.mu.Unlock()
			if err := inject(adB, 1, "to B"); err != nil {
				t.Fatal(err)
			}
			// A's pump, told of B's item, tried to take it.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			for {
				h.mu.Lock()
				n := h.takesError
				h.mu.Unlock()
				if n > 0 {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("replica A never tried to take B's message")
				}
				time.Sleep(5 * time.Millisecond)
			}
			h.mu.Lock()
			h.loseAdmit = true
			h.mu.Unlock()
			err := inject(adA, 2, "to A")
			if tc.redeliver {
				if err == nil {
					t.Fatal("the admission whose answer was lost was not refused")
				}
				if err := inject(adA, 2, "to A"); err != nil {
					t.Fatalf("redelivery: %v", err)
				}
			}
			h.mu.Lock()
			h.failTakes = false
			lost := h.admitsLost
			h.mu.Unlock()
			if lost != 1 {
				t.Fatalf("%d admissions lost their answers, want 1", lost)
			}
			if rerun && err != nil {
				t.Fatalf("inject through a run again: %v", err)
			}
			// Well under the lease TTL: the items do not wait for it.
			// (The two may share a run: the second joins the first's.)
			if got := waitSessionTexts(t, dir, 3, 10*time.Second); !slices.Equal(got, []string{"first", "to B", "to A"}) {
				t.Fatalf("the session has %q, want first, to B, to A", got)
			}
			clusterSay(t, adA, model, 3, "last")
			want := []string{"first", "to B", "to A", "last"}
			if got := waitSessionTexts(t, dir, len(want), 10*time.Second); !slices.Equal(got, want) {
				t.Fatalf("the session has %q, want %q: a message ran twice or out of order", got, want)
			}
			if n := model.calls.Load(); n > int64(len(want)) {
				t.Fatalf("%d provider requests for %q: something ran twice", n, want)
			}
		})
	}
}
