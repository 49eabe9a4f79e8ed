package gateway

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pibot/pibot/chat"
)

// maxThreadTitle bounds the title of a thread the gateway opens, in runes
// (Discord allows 100).
const maxThreadTitle = 80

// maxRecentThreads bounds how many channels the most recently active
// thread is remembered for; past it the memory starts over (target then
// falls back to the index).
const maxRecentThreads = 10000

// threads knows the reply threads of channels on platforms whose adapter
// opens them (chat.ThreadOpener: Discord, Slack): it opens a thread for a
// channel message the bot answers, marks events of a thread the bot takes
// part in as chat.Inbound.Bound, and finds the thread a command sent on a
// channel's main line applies to. Platforms without a ThreadOpener
// (Telegram: forum topics are channels of their own) are left alone.
type threads struct {
	adapters map[chat.Platform]chat.Adapter
	index    Index
	log      *slog.Logger

	mu sync.Mutex
	// recent is, per channel main line (its key), the thread of it that
	// last had a message.
	recent map[string]chat.ConvRef
}

func newThreads(adapters map[chat.Platform]chat.Adapter, index Index, log *slog.Logger) *threads {
	return &threads{adapters: adapters, index: index, log: log, recent: map[string]chat.ConvRef{}}
}

// opener returns p's thread opener, nil if its adapter opens no threads.
func (t *threads) opener(p chat.Platform) chat.ThreadOpener {
	o, _ := t.adapters[p].(chat.ThreadOpener)
	return o
}

// markBound sets in.Bound when in is in a reply thread already bound to a
// session, so that people need not mention the bot there (access.Check
// waives the mention rule for it). It runs before the access check.
func (t *threads) markBound(ctx context.Context, in *chat.Inbound) {
	if in.Bound || in.Conv.Thread == "" || in.Conv.DM || t.opener(in.Conv.Platform) == nil {
		return
	}
	_, ok, err := t.index.Get(ctx, in.Conv.Key())
	if err != nil {
		// Not bound as far as we can tell: a mention still gets through.
		t.log.Warn("index: is this thread bound", "conv", in.Conv.Key(), "err", err)
		return
	}
	in.Bound = ok
}

// wantsThread reports whether in, an allowed message, is answered in a
// thread the gateway opens: a message (not a command) on the main line of
// a channel of a platform whose adapter opens threads.
func (t *threads) wantsThread(in chat.Inbound) bool {
	return in.Kind == chat.KindMessage && in.Command == nil && !in.Conv.DM && in.Conv.Thread == "" &&
		in.Msg.ID != "" && t.opener(in.Conv.Platform) != nil
}

// open opens the thread in is answered in and returns in moved there
// (in.Msg stays the channel message the thread hangs off). It is called
// after the access check, so an ignored message never opens a thread.
func (t *threads) open(ctx context.Context, in chat.Inbound) (chat.Inbound, error) {
	conv, err := t.opener(in.Conv.Platform).OpenThread(ctx, in.Msg, threadTitle(in.Text))
	if err != nil {
		return in, err
	}
	in.Conv = conv
	return in, nil
}

// threadTitle is a thread's name made from the text of the message it
// hangs off: its first non-empty line, shortened.
func threadTitle(text string) string {
	title := ""
	for line := range strings.Lines(text) {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			title = line
			break
		}
	}
	if title == "" {
		return "pibot"
	}
	if utf8.RuneCountInString(title) > maxThreadTitle {
		r := []rune(title)
		title = strings.TrimSpace(string(r[:maxThreadTitle-1])) + "…"
	}
	return title
}

// touch remembers conv, a thread that has just had a message, as its
// channel's most recently active one.
func (t *threads) touch(conv chat.ConvRef) {
	if conv.Thread == "" || conv.DM {
		return
	}
	main := conv
	main.Thread = ""
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.recent) >= maxRecentThreads {
		clear(t.recent)
	}
	t.recent[main.Key()] = conv
}

// target is where a command sent in conv acts. A command sent on the main
// line of a channel that is not bound itself applies to the channel's most
// recently active bound thread (a Slack "/pi stop" in a channel stops the
// conversation running in a thread there); everything else acts where it
// was sent. The most recent thread is remembered by this process; failing
// that (after a restart, or when another replica saw the thread), it is
// the bound thread with the highest id, the newest on Slack and Discord,
// whose ids grow with time.
func (t *threads) target(ctx context.Context, conv chat.ConvRef) chat.ConvRef {
	if conv.DM || conv.Thread != "" || t.opener(conv.Platform) == nil {
		return conv
	}
	key := conv.Key()
	if _, ok, err := t.index.Get(ctx, key); err != nil || ok {
		return conv
	}
	t.mu.Lock()
	recent, seen := t.recent[key]
	t.mu.Unlock()
	if seen {
		if _, ok, err := t.index.Get(ctx, recent.Key()); err == nil && ok {
			return recent
		}
	}
	keys, err := t.index.KeysWithPrefix(ctx, key)
	if err != nil {
		t.log.Warn("index: threads of a channel", "conv", key, "err", err)
		return conv
	}
	best := ""
	for _, k := range keys {
		id, ok := strings.CutPrefix(k, key+":")
		if ok && id != "" && !strings.Contains(id, ":") && newerID(id, best) {
			best = id
		}
	}
	if best == "" {
		return conv
	}
	conv.Thread = best
	return conv
}

// newerID reports whether thread id a is newer than b: Slack timestamps
// and Discord snowflakes grow with time, so a longer id, or an equally
// long one that sorts after, is newer.
func newerID(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}
