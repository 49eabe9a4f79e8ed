package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/session"
)

// pollInbox is a shared inbox whose Keys lists keys whose items are
// elsewhere (Pending finds none), and whose Pending of "a" waits until
// release is closed. It records the keys Pending was asked about.
type pollInbox struct {
	keys    []string
	atA     chan struct{} // receives when Pending("a") begins
	release chan struct{}

	mu    sync.Mutex
	asked []string
}

func (ib *pollInbox) Enqueue(context.Context, string, []byte) (string, func() error, error) {
	return "", nil, nil
}
func (ib *pollInbox) Ack(context.Context, string, string) error                    { return nil }
func (ib *pollInbox) Keys(context.Context) ([]string, error)                       { return ib.keys, nil }
func (ib *pollInbox) Claim(context.Context, string) ([]cluster.InboxItem, error)   { return nil, nil }
func (ib *pollInbox) Consume(context.Context, string) ([]cluster.InboxItem, error) { return nil, nil }
func (ib *pollInbox) recorded() []string {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return slices.Clone(ib.asked)
}
func (ib *pollInbox) Pending(_ context.Context, key string) ([]cluster.InboxItem, error) {
	ib.mu.Lock()
	ib.asked = append(ib.asked, key)
	ib.mu.Unlock()
	if key == "a" {
		select {
		case ib.atA <- struct{}{}:
		default:
		}
		<-ib.release
	}
	return nil, nil
}

// TestPumpServesKicksDuringAPoll: a key kicked while a poll goes over the
// keys with pending items (one or two Redis round trips each; a thousand
// keys when a thousand runs are in progress) is looked at before the
// poll's next key, not after the whole poll.
func TestPumpServesKicksDuringAPoll(t *testing.T) {
	dir := t.TempDir()
	ix, err := openLocalIndex(filepath.Join(dir, "index.jsonl"), filepath.Join(dir, "sessions"), session.FileStorage{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ib := &pollInbox{keys: []string{"a", "b", "c"}, atA: make(chan struct{}, 1), release: make(chan struct{})}
	p := &pump{log: slog.New(slog.DiscardHandler), inbox: ib, consume: ib, index: ix,
		sessions: &registry{owners: map[string]*owner{}}, poll: time.Millisecond,
		kicks: make(chan string, 8), elsewhere: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	<-ib.atA // the poll is at its first key
	p.kick("kicked")
	close(ib.release)
	for deadline := time.Now().Add(10 * time.Second); len(ib.recorded()) < 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("keys looked at %q; the poll stopped", ib.recorded())
		}
	}
	if got, want := ib.recorded()[:4], []string{"a", "kicked", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("keys looked at %q, want %q: the kick waited for the poll", got, want)
	}
}

// nopWatch is a watcher that tells of nothing until ctx ends.
type nopWatch struct{}

func (nopWatch) Watch(ctx context.Context, _ func(string)) error {
	<-ctx.Done()
	return nil
}

// TestPumpLeavesKicksHeldElsewhereToTheNotice: with an inbox that tells
// the holder of new items, the replica that accepted an item for a
// session another replica held a moment ago does not ask about it again
// (the holder is told); without notices it asks at once, and so it does
// once the moment has passed.
func TestPumpLeavesKicksHeldElsewhereToTheNotice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch cluster.Watcher
		ago   time.Duration // since the session was found elsewhere
		asks  bool
	}{
		{"notices, held elsewhere just now", nopWatch{}, 0, false},
		{"notices, held elsewhere long ago", nopWatch{}, 2 * elsewhereWait, true},
		{"no notices", nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ix, err := openLocalIndex(filepath.Join(dir, "index.jsonl"), filepath.Join(dir, "sessions"), session.FileStorage{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			ib := &pollInbox{atA: make(chan struct{}, 1), release: make(chan struct{})}
			close(ib.release)
			p := &pump{log: slog.New(slog.DiscardHandler), inbox: ib, consume: ib, index: ix,
				sessions: &registry{owners: map[string]*owner{}}, poll: time.Hour, watch: tc.watch,
				kicks: make(chan string, 8), pushes: make(chan string, 8), elsewhere: map[string]time.Time{}}
			p.elsewhere["k"] = time.Now().Add(elsewhereWait - tc.ago)
			p.kicked(t.Context(), "k")
			if asked := slices.Contains(ib.recorded(), "k"); asked != tc.asks {
				t.Fatalf("asked about k: %v, want %v", asked, tc.asks)
			}
		})
	}
}
