package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// The crash-point suite: for every durable step of a message's life
// (internal/crashpoint) a real conversation runs through the real binary
// (built with the crashpoints tag) and pibot dies at that step as kill -9
// would: q1 asks for a tool call, q2 is steered into the run and q3 queued
// as its follow-up while the model answers after the tool; one run answers
// the three. pibot starts again, unarmed, and q4 follows. Then:
//
//   - every message Telegram handed over is answered exactly once in the
//     chat: its answer's BEGIN and END markers each show once. The one
//     exception is the documented window: a post the platform took an
//     instant before the crash, before pibot noted it (reply.post), is
//     not known to the restart, which posts that part again. The test
//     allows a second copy only at that point, and only inside the
//     newest message of the chat when pibot died, which no journal entry
//     in the session file as the crash left it names (cpCrash.window);
//   - nothing is set aside (no crash hit a message twice);
//   - the tool ran once (not at all when pibot died with its call
//     recorded and the tool not started: its outcome is then unknown);
//   - one session file, every user message in it once, read cleanly by
//     the full loader and (when compat/pi-check.sh installed it) by pi.
//
// Cluster rows run two replicas on the real Redis. Beside the rows run
// the release check (no crash point in a release build) and the
// aimed-kill campaign (cpcampaign_test.go).

// cpPoint is one row of the suite: where pibot dies, and the state of
// the conversation there.
type cpPoint struct {
	point string
	hit   int // the hit that kills (1: the first)
	what  string
	// onDisk are texts the session file holds when pibot dies there:
	// what makes the point the one the row means (checked).
	onDisk []string
	// cluster: two replicas on Redis; the first runs the conversation
	// alone until a crash. taker: the test kills the first (SIGKILL) when
	// the model's call after the tool is held, and starts the second,
	// armed: pibot dies in the replica that takes the session over.
	cluster, taker bool
	// compact is the embedded inbox's compaction threshold, in records,
	// of every start (PIBOT_CRASHPOINT_INBOX_COMPACT; 0: the inbox's
	// own 4,096, which the conversation never reaches). A row that sets
	// it dies in a compaction that carries items over (checked), and
	// the restart finds no temporary file of it.
	compact int
}

// spec is the point as PIBOT_CRASHPOINT names it.
func (p cpPoint) spec() string { return p.point + "#" + strconv.Itoa(p.hit) }

// name is the row's subtest name: its point, and where it is armed.
func (p cpPoint) name() string {
	switch {
	case p.taker:
		return "takeover:" + p.spec()
	case p.cluster:
		return "cluster:" + p.spec()
	}
	return p.spec()
}

// cpPoints are the rows, in the order of the conversation: the embedded
// gateway's, then cluster mode's.
var cpPoints = []cpPoint{
	{point: crashpoint.Lease, hit: 1, what: "the new conversation's session lease granted, no file yet"},
	{point: crashpoint.Bound, hit: 1, what: "the new conversation bound to its session file in the index, the file not created"},
	{point: crashpoint.InboxAppend, hit: 1, what: "q1 durable in the inbox, not acknowledged to Telegram"},
	{point: crashpoint.UserEntry, hit: 1, what: "q1's entry appended"},
	{point: crashpoint.ToolCall, hit: 1, what: "the tool call flushed, the tool not started"},
	{point: crashpoint.ToolResult, hit: 1, what: "the tool's result flushed"},
	{point: crashpoint.InboxAppend, hit: 2, what: "q2 durable in the inbox while the model answers after the tool"},
	{point: crashpoint.InboxAppend, hit: 3, what: "q3 durable in the inbox"},
	{point: crashpoint.AnswerEntry, hit: 1, what: "q1's answer appended (the group commit has not written it), q2 steered and q3 queued in the run"},
	{point: crashpoint.UserEntry, hit: 2, what: "q2 taken into the run after q1's answer"},
	{point: crashpoint.AnswerEntry, hit: 2, what: "q1's answer and q2 on disk, q2's answer appended, q3 queued: q1's answer saved, not delivered, followed by another message",
		onDisk: []string{"END-q1", "q2: this steers"}},
	{point: crashpoint.UserEntry, hit: 3, what: "q3 taken into the run as its follow-up"},
	{point: crashpoint.AnswerEntry, hit: 3, what: "q1's and q2's answers and q3 on disk, q3's answer appended", onDisk: []string{"END-q1", "END-q2", "q3: and this"}},
	{point: crashpoint.PostedPart, hit: 1, what: "the reply's first message posted, not journaled (the documented window)"},
	{point: crashpoint.ReplyJournal, hit: 1, what: "the reply's first message journaled"},
	{point: crashpoint.PostedPart, hit: 2, what: "q1's long answer's second message posted, not journaled (the documented window)"},
	{point: crashpoint.ReplyJournal, hit: 2, what: "q1's long answer's second message journaled"},
	{point: crashpoint.ReplyFinal, hit: 1, what: "the platform confirmed the reply's final text (all three answers), its delivery not recorded",
		onDisk: []string{"END-q1", "END-q2", "END-q3"}},
	{point: crashpoint.DeliveryRecord, hit: 1, what: "the run's delivery recorded"},
	{point: crashpoint.InboxAck, hit: 1, what: "q1 acknowledged, q2 and q3 not yet"},
	{point: crashpoint.InboxAck, hit: 3, what: "the run's last message acknowledged"},
	// The inbox compacts at every start (hit 1); with a threshold of one
	// record it compacts again at the first acknowledgement that leaves
	// four times more records of done items than items held (hit 2),
	// q2's: the new file carries q3, whose acknowledgement goes on while
	// the compaction runs on its goroutine.
	{point: crashpoint.CompactPartial, hit: 2, compact: 1, what: "the inbox compacting, on its own goroutine, the message it held at an acknowledgement: those records written to the new file, not fsynced"},
	{point: crashpoint.CompactWritten, hit: 2, compact: 1, what: "the inbox compacting the message it held at an acknowledgement: the new file whole and fsynced, not renamed"},
	{point: crashpoint.CompactRenamed, hit: 2, compact: 1, what: "the inbox compacting the message it held at an acknowledgement: the new file renamed over the old, the directory not fsynced"},
	{point: crashpoint.CompactSynced, hit: 2, compact: 1, what: "the inbox compacting the message it held at an acknowledgement: the rename durable, the inbox not yet appending to the new file"},

	{point: crashpoint.Lease, hit: 1, cluster: true, what: "a replica took the new conversation's session lease; the other takes over"},
	{point: crashpoint.Bound, hit: 1, cluster: true, what: "a replica bound the new conversation to its session file, not created; the other takes over"},
	{point: crashpoint.PumpHandoff, hit: 1, cluster: true, what: "the pump claimed q1 for its new session, not handed to the mailbox"},
	// q3 (/followup) is the first event the intake dedupes on its own
	// before it classifies it: its key is recorded, pending, and its
	// item never enqueued. The other replica refuses the redelivery as in
	// flight until the key expires (30 s), then takes it. Before, the key
	// lived 48 hours: q3 was dropped as a duplicate, never answered.
	{point: crashpoint.DedupeSeen, hit: 1, cluster: true, what: "q3's dedupe key recorded (pending), its item not enqueued; the other replica takes its redelivery once the key expires"},
	{point: crashpoint.AnswerEntry, hit: 2, cluster: true, what: "q1's answer and q2 on disk, q2's answer appended; the other replica takes over",
		onDisk: []string{"END-q1", "q2: this steers"}},
	{point: crashpoint.Fence, hit: 1, taker: true, what: "the replica taking over from a killed one wrote its lease marker, claimed nothing yet"},
	{point: crashpoint.PumpHandoff, hit: 1, taker: true, what: "the replica taking over from a killed one claimed the items, not handed on"},
}

// TestCrashPoints runs the conversation once per point, named after it,
// the release check and the aimed-kill campaign, side by side, with one
// build of the crashpoints binary; pi reads the session files once all
// are done.
func TestCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := crashBuildTags(t, "crashpoints")
	kept := t.TempDir() // the session files, for pi once every point ran
	var mu sync.Mutex
	var files []string
	t.Cleanup(func() {
		if !t.Failed() && len(files) > 0 {
			checkPiReads(t, files)
		}
	})
	t.Run("release", func(t *testing.T) {
		t.Parallel()
		checkRelease(t, bin)
	})
	t.Run("campaign", func(t *testing.T) {
		t.Parallel()
		aimedKills(t, bin)
	})
	for i, pt := range cpPoints {
		t.Run(pt.name(), func(t *testing.T) {
			t.Parallel()
			w := newCPWorld(t, bin, pt.cluster || pt.taker)
			w.converse(pt)
			w.check(pt)
			mu.Lock()
			defer mu.Unlock()
			files = append(files, keepFile(t, sessionFiles(w.data)[0], filepath.Join(kept, fmt.Sprintf("s%02d.jsonl", i))))
		})
	}
}

// converse runs the conversation with pibot armed at pt.
func (w *cpWorld) converse(pt cpPoint) {
	w.t.Helper()
	armed := pt.spec()
	if pt.taker {
		armed = ""
	}
	if pt.compact > 0 {
		w.env = []string{"PIBOT_CRASHPOINT_INBOX_COMPACT=" + strconv.Itoa(pt.compact)}
	}
	w.start(0, armed)
	w.ask("q1", "q1: please use the tool, then answer at length")
	if w.crash == nil {
		w.until("the model's call after the tool", w.model.heldNow)
	}
	if pt.taker && w.crash == nil {
		w.kill(0)
		w.start(1, pt.spec())
	}
	w.ask("q2", "q2: this steers the run; answer slowly")
	w.ask("q3", "/followup q3: and this follows it, slowly")
	if w.crash == nil && !pt.taker {
		w.until("q2 steered and q3 queued", func() bool {
			return w.shows("will steer the current run") && w.shows("queued as a follow-up")
		})
	}
	w.model.let()
	w.settle()
	w.ask("q4", "q4: one more after all that")
	w.settle()
	if w.crash == nil {
		w.t.Fatalf("pibot never reached %s", pt.spec())
	}
	w.stop()
}

// check checks the invariants once the conversation is over.
func (w *cpWorld) check(pt cpPoint) {
	t := w.t
	t.Helper()
	if want := "crash point " + pt.point + " reached (hit " + strconv.Itoa(pt.hit) + ")"; !strings.Contains(w.crash.log, want) {
		t.Fatalf("pibot died, but not at %s:\n%s", pt.spec(), w.crash.log)
	}
	for _, sub := range pt.onDisk {
		if !strings.Contains(w.crash.file, sub) {
			t.Fatalf("the session file did not hold %q when pibot died at %s: the test missed its aim", sub, pt.spec())
		}
	}
	if pt.compact > 0 {
		// The compaction runs on a goroutine of its own: the run's
		// acknowledgements go on meanwhile, and by its later steps the
		// old file may hold none. The items its new file carries over
		// are what the restart must hand over once, or not again.
		if w.crash.compactCarried == 0 {
			t.Fatalf("the compaction pibot died in at %s carried no item: the test missed its aim", pt.spec())
		}
		if tmps, _ := filepath.Glob(filepath.Join(w.data, ".inbox.jsonl.tmp*")); len(tmps) > 0 {
			t.Errorf("the killed compaction's temporary files outlived the restart: %q", tmps)
		}
	}
	// One conversation: only a crash at a post can leave a post unnoted.
	window := ""
	if pt.point == crashpoint.PostedPart {
		window = w.crash.window(w, cpChat)
	}
	said := w.said()
	reposted := 0
	for _, id := range w.asked {
		for _, mark := range []string{"BEGIN-" + id, "END-" + id} {
			n, inWindow := markCount(said, mark), markCount(window, mark)
			switch {
			case n == 1:
			case n == 2 && inWindow == 1:
				reposted++
			default:
				t.Errorf("%s shows %d times (%d in a post the crash left unnoted), want once", mark, n, inWindow)
			}
		}
	}
	if strings.Contains(said, "set aside") || w.quarantined() > 0 {
		t.Errorf("a message was set aside after one crash")
	}
	runs, want := w.toolRuns(), 1
	if pt.point == crashpoint.ToolCall {
		want = 0 // its call recorded, the tool never started: its outcome is unknown
	}
	if runs != want {
		t.Errorf("the tool ran %d times, want %d", runs, want)
	}
	files := sessionFiles(w.data)
	if len(files) != 1 {
		t.Fatalf("one conversation has %d session files: %q", len(files), files)
	}
	users := loadCleanly(t, files[0])
	for _, id := range w.asked {
		if users[id] != 1 {
			t.Errorf("%s is in the session %d times, want once", id, users[id])
		}
	}
	t.Logf("%s (%s): every message answered once; %d markers posted twice in the window; tool runs %d; inbox items held at the crash %d (carried by its compaction %d)",
		pt.name(), pt.what, reposted, runs, w.crash.inboxHeld, w.crash.compactCarried)
}

// loadCleanly opens a session file with the full loader, fails on any
// line it had to skip, and counts the user messages by question id.
func loadCleanly(t *testing.T, path string) map[string]int {
	t.Helper()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer s.Close()
	if r := s.Report(); len(r.SkippedLines) > 0 {
		t.Errorf("the session file has lines the loader skipped: %+v", r)
	}
	users := map[string]int{}
	for _, e := range s.Tree().Entries() {
		if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser {
			for _, id := range questionID.FindAllString(e.Message.Text(), 1) {
				users[id]++
			}
		}
	}
	if _, err := s.Tree().Context(s.Tree().Leaf()); err != nil {
		t.Errorf("context of the session's leaf: %v", err)
	}
	return users
}

// checkPiReads has pi 0.73.1 build the context of every leaf of the
// files (compat/pi-context.mjs), as compat/pi-check.sh does; skipped
// (logged) when pi is not installed.
func checkPiReads(t *testing.T, files []string) {
	t.Helper()
	cache := os.Getenv("PIBOT_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "pibot")
	}
	pi := filepath.Join(cache, "pi-0.73.1")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(pi, "node_modules", "@mariozechner", "pi-coding-agent", "package.json")); serr != nil || err != nil {
		t.Log("pi is not installed (run compat/pi-check.sh once) or node is missing: the files were checked by pibot's own loader only")
		return
	}
	root, _ := filepath.Abs("..")
	gen := exec.Command("go", append([]string{"run", "./compat/cmd/writesessions", "-expect"}, files...)...)
	gen.Dir = root
	if b, err := gen.CombinedOutput(); err != nil {
		t.Errorf("writesessions -expect: %v\n%s", err, b)
		return
	}
	check := exec.Command(node, append([]string{filepath.Join(root, "compat", "pi-context.mjs")}, files...)...)
	check.Env = append(os.Environ(), "PI_DIR="+pi)
	b, err := check.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "==") {
		t.Errorf("pi-context: %v\n%s", err, b)
		return
	}
	t.Logf("pi reads the %d session files with pibot's context", len(files))
}

// keepFile copies the file at from to to and returns to.
func keepFile(t *testing.T, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}
