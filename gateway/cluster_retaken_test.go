package gateway_test

import (
	"context"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// secondHeldModel answers "ok"; its first request waits until its run
// is cancelled, its second until the test lets it go.
type secondHeldModel struct {
	inner   *faux.Model
	calls   atomic.Int32
	started [2]chan struct{}
	release chan struct{}
}

func newSecondHeldModel() *secondHeldModel {
	info := llm.ModelInfo{ID: "m", Provider: "faux", API: faux.API, ContextWindow: 1 << 20, MaxTokens: 1000}
	return &secondHeldModel{inner: faux.New(info, faux.Text("ok")).WithoutLog(),
		started: [2]chan struct{}{make(chan struct{}), make(chan struct{})}, release: make(chan struct{})}
}

func (m *secondHeldModel) Info() llm.ModelInfo { return m.inner.Info() }

func (m *secondHeldModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	n := m.calls.Add(1) - 1
	inner := m.inner.Stream(ctx, req)
	return func(yield func(llm.Event) bool) {
		switch n {
		case 0:
			close(m.started[0])
			<-ctx.Done()
		case 1:
			close(m.started[1])
			select {
			case <-m.release:
			case <-ctx.Done():
			}
		}
		for e := range inner {
			if !yield(e) {
				return
			}
		}
	}
}

// noticeGate is an adapter whose "queued" notices (the 👀 reaction, or
// a status line) wait until hold is closed: the mailbox that executes the
// message waits with them, and so does what was posted behind it.
type noticeGate struct {
	*chattest.Adapter
	hold chan struct{}
	held chan struct{} // closed when a notice first waits
	once sync.Once
}

func (g *noticeGate) wait(ctx context.Context) {
	g.once.Do(func() { close(g.held) })
	select {
	case <-g.hold:
	case <-ctx.Done():
	}
}

func (g *noticeGate) React(ctx context.Context, ref chat.MsgRef, emoji string) error {
	if emoji == "👀" {
		g.wait(ctx)
	}
	return g.Adapter.React(ctx, ref, emoji)
}

func (g *noticeGate) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	if strings.Contains(m.Markdown, "📥") {
		g.wait(ctx)
	}
	return g.Adapter.Send(ctx, conv, m)
}

// TestClusterRetakenSessionRunsEachMessageOnce: a replica loses the lease
// of a session while a run works and messages wait behind it, some still
// in the location's mailbox (its notice that the one before is queued is
// slow to go out), and takes the session over again itself (no other
// replica wants it): its lease key was deleted, or Redis lost everything
// (FLUSHALL). The lost lease's owner gave its items up (Inbox.Leave), and
// the takeover's claim hands them over again, posted behind those still
// in the mailbox. Before, those ran too, in the new owner: a message
// whose two copies both waited behind its first run, neither recorded
// yet, was answered twice (the duplicate of issue 29's FLUSHALL test with
// the real binaries, where Telegram's 429s slowed the notices). Now what
// was handed before the Leave is dropped; every message is recorded once.
func TestClusterRetakenSessionRunsEachMessageOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// flush: FLUSHALL on a private server; else the lease key is
		// deleted on the shared one (a private prefix).
		flush bool
	}{
		{"lease key deleted", false},
		{"FLUSHALL", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				prefix, url string
				lose        func(ctx context.Context) error // takes the lease key away
			)
			if tc.flush {
				srv := redistest.PrivateServer(t)
				probe := srv.Client(t)
				prefix, url = "p:", "redis://"+srv.Addr+"/0"
				lose = func(ctx context.Context) error { return probe.FlushAll(ctx).Err() }
			} else {
				p, px := redistest.LocalPrefix(t, "gateway")
				prefix = px
				lose = func(ctx context.Context) error {
					keys, err := p.Keys(ctx, prefix+"{lease:*}:lock").Result()
					if err != nil || len(keys) == 0 {
						return fmt.Errorf("lease keys %q: %v", keys, err)
					}
					return p.Del(ctx, keys...).Err()
				}
			}
			model := newSecondHeldModel()
			dir := t.TempDir()
			ad := &noticeGate{Adapter: chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps)),
				hold: make(chan struct{}), held: make(chan struct{})}
			a := startRedisReplica(t, ad, model, dir, redisReplica{prefix: prefix, id: "replica-a", url: url,
				poll: 50 * time.Millisecond, leaseTTL: time.Second, mode: "followup"})
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			var once [2]sync.Once
			letNotices := func() { once[0].Do(func() { close(ad.hold) }) }
			letModel := func() { once[1].Do(func() { close(model.release) }) }
			defer letModel()
			defer letNotices()
			wait := func(ch chan struct{}, what string) {
				t.Helper()
				select {
				case <-ch:
				case <-ctx.Done():
					t.Fatalf("%s never happened", what)
				}
			}
			send := func(n int) {
				t.Helper()
				in := benchMessage(ad.Platform(), 1, n, fmt.Sprintf("m%d", n))
				in.DedupKey = fmt.Sprintf("retaken:%d", n)
				if err := ad.Inject(ctx, in); err != nil {
					t.Fatalf("inject m%d: %v", n, err)
				}
			}
			send(0)
			wait(model.started[0], "the first run's provider request")
			want := []string{"m0", "m1", "m2", "m3"}
			for n := 1; n < len(want); n++ {
				send(n)
			}
			wait(ad.held, "m1's queued notice")
			if err := lose(ctx); err != nil {
				t.Fatal(err)
			}
			// The replica takes the session over again: its claim posts
			// the messages behind m2 and m3, still in the mailbox.
			for !takenOver(t, dir) {
				if ctx.Err() != nil {
					t.Fatal("the session was not taken over again")
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // the claim's round trip
			letNotices()
			// The new owner's first run waits while the mailbox runs what
			// waited in it, in a moment: with no round trip to Redis.
			wait(model.started[1], "the retaken session's run")
			time.Sleep(300 * time.Millisecond)
			letModel()
			for {
				got := sessionUserTexts(t, dir)
				if a.pending() == 0 && containsAll(got, want) {
					for _, w := range want {
						if n := count(got, w); n != 1 {
							t.Errorf("%q is recorded %d times, want once (the session holds %q)", w, n, got)
						}
					}
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("the session holds %q and %d keys wait; want each of %q once", got, a.pending(), want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// takenOver reports whether a session file in dir holds a takeover's
// lease marker (the second lease of the session).
func takenOver(t *testing.T, dir string) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir(filepath.Join(dir, "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		b, err := os.ReadFile(p)
		found = found || err == nil && strings.Contains(string(b), `"customType":"pibot.lease"`)
		return nil
	})
	return found
}
