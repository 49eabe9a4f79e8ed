package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// TestMissingIndexIsRebuiltFromSessions: the location index is a cache of
// the session files. Without index.jsonl the next start rebuilds it from
// their heads, so each conversation continues in its own session.
func TestMissingIndexIsRebuiltFromSessions(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("dm answer"), faux.Text("group answer"), faux.Text("dm again")})
	h.send("remember the dm")
	h.waitText(dmConv, "dm answer")
	h.send("remember the group", inConv(groupConv), from("owner"), mentioned())
	h.waitText(groupConv, "group answer")
	h.waitFor("an empty inbox", func() bool { return h.inbox.Len() == 0 })
	h.stop()
	if err := os.Remove(filepath.Join(h.dir, "index.jsonl")); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.send("and now?")
	h.waitText(dmConv, "dm again")
	if n := len(h.sessions()); n != 2 {
		t.Fatalf("%d session files, want 2 (one per conversation)", n)
	}
	if texts := h.lastRequestTexts(); !slices.Contains(texts, "remember the dm") || slices.Contains(texts, "remember the group") {
		t.Fatalf("the dm continued with the wrong context: %q", texts)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "index.jsonl")); err != nil {
		t.Fatalf("the rebuilt index was not written: %v", err)
	}
}

// flakyIndex is a location index whose store is unreachable while down is
// set (a network index in an outage).
type flakyIndex struct {
	*cluster.LocalIndex
	down atomic.Bool
}

var errIndexDown = errors.New("index store unreachable")

func (f *flakyIndex) Get(ctx context.Context, loc string) (string, bool, error) {
	if f.down.Load() {
		return "", false, errIndexDown
	}
	return f.LocalIndex.Get(ctx, loc)
}

// TestIndexOutageLosesNoMessage: while the index cannot be read, a
// message is not taken into a new session (its conversation may already
// have one); the sender is told, and the message stays in the inbox until
// a start with a working index answers it in its conversation's session.
func TestIndexOutageLosesNoMessage(t *testing.T) {
	dir := t.TempDir()
	cix, err := cluster.OpenIndex(filepath.Join(dir, "index.jsonl"), cluster.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cix.Close() })
	ix := &flakyIndex{LocalIndex: cix}
	h := newHarness(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer")}, withDir(dir), withIndex(ix))
	h.send("first")
	h.waitText(dmConv, "first answer")
	h.waitFor("an empty inbox", func() bool { return h.inbox.Len() == 0 })
	ix.down.Store(true)
	h.send("second")
	h.waitFor("the sender told", func() bool { return h.countIn("could not open this conversation") == 1 })
	if n := h.inbox.Len(); n != 1 {
		t.Fatalf("%d messages in the inbox during the outage, want 1", n)
	}
	ix.down.Store(false)
	h.restart()
	h.waitText(dmConv, "second answer")
	if n := len(h.sessions()); n != 1 {
		t.Fatalf("%d session files, want 1", n)
	}
	if texts := h.lastRequestTexts(); !slices.Contains(texts, "first") || !strings.Contains(strings.Join(texts, "|"), "second") {
		t.Fatalf("the second message was not answered in the conversation's session: %q", texts)
	}
}

// TestIndexRebuildReadsNoFileWhole: a missing index is rebuilt from the
// envelopes of the session files, streamed: a clean file is never read
// whole (issue #34: the start allocated 187 MB for one 100k-entry file);
// a file with a torn tail is read whole, as the read-only loader reads a
// damaged file, and is not repaired. Both conversations are bound again.
func TestIndexRebuildReadsNoFileWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := filepath.Join(dir, "sessions", "long.jsonl")
	writeLongSession(t, long, 2000, 500, dmConv.Key())
	torn := filepath.Join(dir, "sessions", "torn.jsonl")
	writeLongSession(t, torn, 100, -1, groupConv.Key())
	f, err := os.OpenFile(torn, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"type":"message","id":"cut`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	files := &wholeReads{}
	newHarness(t, nil, withDir(dir), withSessionFiles(files))
	if got := files.paths(); !slices.Equal(got, []string{torn}) {
		t.Fatalf("session files read whole: %q, want only the damaged one", got)
	}
	if _, err := os.Stat(torn + ".broken"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rebuild repaired the damaged file: %v", err)
	}
	want := map[string]string{dmConv.Key(): long, groupConv.Key(): torn}
	if got := indexBindings(t, filepath.Join(dir, "index.jsonl")); !maps.Equal(got, want) {
		t.Fatalf("rebuilt bindings %v, want %v", got, want)
	}
}

// indexBindings reads the bindings an index file holds.
func indexBindings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ Loc, Path string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("index line %q: %v", sc.Text(), err)
		}
		if r.Path == "" {
			delete(out, r.Loc)
		} else {
			out[r.Loc] = r.Path
		}
	}
	return out
}

// wholeReads is the local file system noting the session files read
// whole (ReadFile).
type wholeReads struct {
	session.FileStorage
	mu   sync.Mutex
	read []string
}

func (w *wholeReads) ReadFile(path string) ([]byte, error) {
	if strings.HasSuffix(path, ".jsonl") {
		w.mu.Lock()
		w.read = append(w.read, path)
		w.mu.Unlock()
	}
	return w.FileStorage.ReadFile(path)
}

func (w *wholeReads) paths() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.read)
}
