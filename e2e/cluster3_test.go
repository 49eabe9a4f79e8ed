package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// Three replicas on one data directory and the real Redis: messages
// spread over them, SIGKILL of a session's owner (also inside a tool
// call), webhook deliveries through a round-robin proxy, and polling.

// TestClusterThreeReplicasSpreadAndKill: the messages of one chat arrive
// at three replicas in turn and are answered once each, in order; the
// session's owner is killed with SIGKILL while it streams a reply, one of
// the two others finishes it, and the traffic that follows, spread over
// the two, is answered once each too.
func TestClusterThreeReplicasSpreadAndKill(t *testing.T) {
	w := newClusterWorld(t)
	all := w.replicas(3, replicaOpts{})
	var texts []string
	for i := range 6 {
		text := fmt.Sprintf("message %d", i)
		texts = append(texts, text)
		w.say(all[i%3], text)
	}
	w.waitAnswered(texts, 90*time.Second)
	path := w.sessionFile()
	owner := byReplicaID(all, w.holder(path))
	if owner == nil {
		t.Fatalf("lease of %s held by %q, not a replica", path, w.holder(path))
	}
	rest := others(all, owner)
	long := "long one:" + strings.Repeat(" please keep streaming", 13)
	texts = append(texts, long)
	w.say(rest[0], long)
	w.waitStreaming("long one")
	killed := time.Now()
	owner.kill()
	w.waitAnswered([]string{long}, 60*time.Second)
	t.Logf("the reply cut by the kill was finished %v after it (lease TTL %v)",
		time.Since(killed).Round(10*time.Millisecond), clusterLeaseMs*time.Millisecond)
	for i := range 4 {
		text := fmt.Sprintf("after the kill %d", i)
		texts = append(texts, text)
		w.say(rest[i%2], text)
	}
	w.waitAnswered(texts, 90*time.Second)
	time.Sleep(500 * time.Millisecond) // a duplicate would show up meanwhile
	w.checkAnswered(texts)
	if h := w.lastTaker(path); h != markerHolder(rest[0]) && h != markerHolder(rest[1]) {
		t.Errorf("session taken over by %q, want one of the survivors", h)
	}
	if n := w.checkFile(texts); n < 1 {
		t.Fatal("no pibot.lease marker after the takeover")
	}
	for _, p := range rest {
		p.stop()
	}
}

// TestClusterWebhookRoundRobinKill: the fake Bot API delivers the chat's
// updates to the webhook itself, through a round-robin proxy over three
// replicas, and delivers again whatever was not answered 2xx, as Telegram
// does. The session's owner is killed with SIGKILL in the middle of the
// traffic: the proxy's requests to it fail, those deliveries are retried
// on the next replica, and every message is answered exactly once, in
// order. (It found two faults: a message that arrived while a run was
// starting was answered after later ones, and the faux echo quoted only
// the last of messages answered together, which read as a lost message.)
func TestClusterWebhookRoundRobinKill(t *testing.T) {
	w := newClusterWorld(t, telegramtest.WithWebhookDelivery(200*time.Millisecond))
	proxy := newRRProxy(t)
	o := replicaOpts{webhookURL: proxy.URL}
	all := w.replicas(3, o)
	proxy.route(t, all...)
	w.logOnFailure(all...)
	var texts []string
	send := func(n int, prefix string) {
		for i := range n {
			text := fmt.Sprintf("%s %d", prefix, i)
			texts = append(texts, text)
			w.srv.AddText(clusterChat, clusterUser, text)
			time.Sleep(100 * time.Millisecond)
		}
	}
	send(4, "before")
	w.waitAnswered(texts[:1], 60*time.Second)
	w.waitRecorded(1) // the kill is meant for the messages in flight
	path := w.sessionFile()
	owner := byReplicaID(all, w.holder(path))
	if owner == nil {
		t.Fatalf("lease of %s held by %q, not a replica", path, w.holder(path))
	}
	owner.kill()
	send(6, "after")
	w.waitAnswered(texts, 120*time.Second)
	time.Sleep(500 * time.Millisecond) // a duplicate would show up meanwhile
	w.checkAnswered(texts)
	if n := w.checkFile(texts); n < 1 {
		t.Fatal("no pibot.lease marker after the owner was killed")
	}
	if n := w.srv.Pending(); n != 0 {
		t.Errorf("%d updates never confirmed by a 2xx", n)
	}
	failed, _ := proxy.counts(owner)
	if failed == 0 {
		t.Errorf("the proxy never failed to reach the killed replica: the kill did not happen mid-traffic")
	}
	retried := map[int64]bool{}
	for _, d := range w.srv.Deliveries() {
		switch {
		case d.Code/100 != 2:
			retried[d.UpdateID] = true
		case retried[d.UpdateID]:
			delete(retried, d.UpdateID) // delivered again, and taken
		}
	}
	if len(retried) != 0 {
		t.Errorf("updates never taken after a failed delivery: %v", retried)
	}
	for _, p := range all {
		f, a := proxy.counts(p)
		t.Logf("replica %s: %d deliveries taken, %d failed (killed: %v)", replicaID(p), a, f, p == owner)
	}
	for _, p := range others(all, owner) {
		p.stop()
	}
}

// TestClusterPollingThreeReplicas: with Telegram long polling on three
// replicas only one polls at any time (the fake Bot API counts the polls
// it holds at once and answers overlapping ones 409); after a SIGKILL of
// the leader another replica polls and answers, once.
func TestClusterPollingThreeReplicas(t *testing.T) {
	w := newClusterWorld(t)
	all := w.replicas(3, replicaOpts{mode: "polling"})
	w.logOnFailure(all...)
	pollKey := "adapter:telegram/poll/4242"
	w.srv.AddText(clusterChat, clusterUser, "poll one")
	w.waitAnswered([]string{"poll one"}, 60*time.Second)
	w.waitRecorded(1)
	leader := byReplicaID(all, w.waitHolder(pollKey, func(h string) bool { return byReplicaID(all, h) != nil }))
	killed := time.Now()
	leader.kill()
	w.srv.AddText(clusterChat, clusterUser, "poll two")
	w.waitAnswered([]string{"poll two"}, 60*time.Second)
	for _, c := range w.srv.Calls("getUpdates") {
		if c.Time.After(killed) {
			t.Logf("first poll %v after the leader's SIGKILL (lease TTL %v; goal under TTL + 2s)",
				c.Time.Sub(killed).Round(10*time.Millisecond), clusterLeaseMs*time.Millisecond)
			break
		}
	}
	w.srv.AddText(clusterChat, clusterUser, "poll three")
	w.waitAnswered([]string{"poll three"}, 60*time.Second)
	time.Sleep(500 * time.Millisecond) // a duplicate would show up meanwhile
	texts := []string{"poll one", "poll two", "poll three"}
	w.checkAnswered(texts)
	rest := others(all, leader)
	w.waitHolder(pollKey, func(h string) bool { return byReplicaID(rest, h) != nil })
	w.checkPolls(all...)
	w.checkFile(texts)
	for _, p := range rest {
		p.stop()
	}
}

// unknownOutcome is the tool result pibot records for a call that was
// running when its process died (gateway/recover.go).
const unknownOutcome = "pibot restarted while this tool was running; its outcome is unknown. Check the state before running it again."

// TestClusterKillOwnerInToolCall: the model of the session's owner calls
// the bash tool, which appends a line to a marker file and sleeps; when
// the line is there the owner is killed with SIGKILL. Another replica
// takes the session over: the tool is not run again (one line), the
// session holds the "outcome unknown" result, the user is told, and the
// conversation ends with the new owner's answer.
func TestClusterKillOwnerInToolCall(t *testing.T) {
	w := newClusterWorld(t)
	ws := filepath.Join(w.dir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(ws, "mark.txt")
	// The first replica alone: its model calls the tool, so it owns the
	// session. The others join while the tool runs; their model answers
	// (a model call of theirs follows only a takeover).
	first := w.startWith(replicaOpts{workspace: ws, script: `      - tool_calls:
          - name: bash
            args: {command: "echo ran >> mark.txt; sleep 30"}
`})
	w.say(first, "run the tool")
	crashWait(t, "the tool to run", 60*time.Second, func() bool { _, err := os.Stat(mark); return err == nil })
	const answer = "finished after the takeover"
	o := replicaOpts{workspace: ws, script: "      - text: " + answer + "\n"}
	rest := w.replicas(2, o)
	path := w.sessionFile()
	if h := w.holder(path); h != replicaID(first) {
		t.Fatalf("lease held by %q while the tool runs, want the first replica %q", h, replicaID(first))
	}
	killed := time.Now()
	first.kill()
	crashWait(t, "the new owner's answer", 60*time.Second, func() bool { return strings.Contains(w.said(), answer) })
	t.Logf("answered %v after the SIGKILL (lease TTL %v)", time.Since(killed).Round(10*time.Millisecond), clusterLeaseMs*time.Millisecond)
	time.Sleep(time.Second) // a second run of the tool would show meanwhile
	if b, err := os.ReadFile(mark); err != nil || string(b) != "ran\n" {
		t.Fatalf("marker file %q (%v): the tool ran more than once", b, err)
	}
	said := w.said()
	if n := strings.Count(said, answer); n != 1 {
		t.Errorf("the answer is in the chat %d times, want once:\n%s", n, said)
	}
	if !strings.Contains(said, "interrupted while bash was running: its outcome is unknown") {
		t.Errorf("the user was not told the tool's outcome is unknown; bot messages:\n%s", said)
	}
	if h := w.lastTaker(path); h != markerHolder(rest[0]) && h != markerHolder(rest[1]) {
		t.Errorf("session taken over by %q, want a survivor", h)
	}
	if n := w.checkFile([]string{"run the tool"}); n < 1 {
		t.Fatal("no pibot.lease marker after the takeover")
	}
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var results []string
	for _, e := range s.Tree().Entries() {
		if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleToolResult {
			results = append(results, e.Message.Text())
		}
	}
	if len(results) != 1 || results[0] != unknownOutcome {
		t.Errorf("tool results in the session: %q, want one %q", results, unknownOutcome)
	}
	for _, p := range rest {
		p.stop()
	}
}
