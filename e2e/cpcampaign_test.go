package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/internal/crashpoint"
)

// The aimed-kill campaign: pibot is killed, again and again, at a moment
// when an answer is saved in its session file but its delivery is not
// recorded, while follow-ups of the same conversation are in flight (they
// came after the answer, steered into its run or queued for it). Three
// users write at once; each round arms one of the points where that holds
// (a later answer of a run appended after an earlier one was written; the
// final text confirmed by the platform; the delivery appended, not yet
// written), restarts pibot unarmed after the kill and lets every message
// be answered. A kill counts as aimed when a session file, as the kill
// left it, holds a final answer after its last recorded delivery followed
// by a user message. In the end: no acknowledged message without an
// answer, none answered twice, none set aside.
//
// CI runs until 2 aimed kills; PIBOT_CAMPAIGN_KILLS=30 runs until 30
// (go test ./e2e -run 'TestCrashPoints/campaign' -v prints the figures).

// campaignPoints are the points the rounds take in turn.
var campaignPoints = []string{
	crashpoint.AnswerEntry + "#5", crashpoint.ReplyFinal + "#1", crashpoint.AnswerEntry + "#7", crashpoint.DeliveryRecord + "#1",
}

func aimedKills(t *testing.T, bin string) {
	want := 2
	if s := os.Getenv("PIBOT_CAMPAIGN_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PIBOT_CAMPAIGN_KILLS=%q: want a positive number", s)
		}
		want = n
	}
	others := []models.User{{ID: 7402, FirstName: "Dara"}, {ID: 7403, FirstName: "Emil"}}
	w := newCPWorld(t, bin, false, others...)
	w.model.let()               // nothing held: the follow-ups come while answers stream
	chats := map[string]int64{} // question id -> chat
	q := 0
	ask := func(u models.User, text string) {
		q++
		id := "q" + strconv.Itoa(q)
		chats[id] = u.ID
		w.srv.AddText(u.ID, u, strings.ReplaceAll(text, "ID", id))
	}
	kills, aimed, missed := 0, 0, 0
	// crashes are what each kill left: the posts each chat's window
	// allows twice (cpCrash.window) are read once every answer is out.
	var crashes []*cpCrash
	for round := 0; aimed < want && round < 2*want+2; round++ {
		spec := campaignPoints[round%len(campaignPoints)]
		w.crash = nil
		w.start(0, spec)
		for _, u := range w.users {
			ask(u, "ID: tell me something, slowly")
		}
		time.Sleep(400 * time.Millisecond)
		for _, u := range w.users {
			ask(u, "ID: and this too, slowly")
			ask(u, "/followup ID: then this, slowly")
		}
		if w.until("the armed point or every answer", func() bool { return campaignSettled(w, chats) }) {
			missed++
			t.Logf("round %d: pibot never reached %s", round, spec)
		} else {
			kills++
			hit := campaignAimed(w.crash.files)
			if hit {
				aimed++
			}
			t.Logf("round %d: killed at %s; aimed at an answer saved, not delivered, with a follow-up in flight: %v", round, spec, hit)
			crashes = append(crashes, w.crash)
			for !w.until("every answer after the restart", func() bool { return campaignSettled(w, chats) }) {
			}
		}
		w.stop()
	}
	missing, twice, reposted := 0, 0, 0
	for id, chat := range chats {
		said := chatText(w, chat)
		var window []string
		for _, c := range crashes {
			window = append(window, c.window(w, chat))
		}
		inWindow := strings.Join(window, "\n")
		switch n, begins := markCount(said, "END-"+id), markCount(said, "BEGIN-"+id); {
		case n == 0:
			missing++
			t.Errorf("%s has no answer in its chat", id)
		case n == 1 && begins == 1:
		case n == 2 && begins == 2 && markCount(inWindow, "END-"+id) == 1 && markCount(inWindow, "BEGIN-"+id) == 1:
			reposted++ // posted whole an instant before a kill, before pibot noted it
		default:
			twice++
			t.Errorf("%s is answered %d times in its chat (%d in posts the kills left unnoted)", id, n, markCount(inWindow, "END-"+id))
		}
	}
	if t.Failed() {
		for _, u := range w.users {
			t.Logf("bot messages to %s:\n%s", u.FirstName, chatText(w, u.ID))
		}
	}
	setAside := w.quarantined()
	for _, u := range w.users {
		if strings.Contains(chatText(w, u.ID), "set aside") {
			setAside++
		}
	}
	if setAside > 0 {
		t.Errorf("%d messages set aside", setAside)
	}
	if aimed < want {
		t.Errorf("%d aimed kills, want %d (%d kills, %d rounds the point was not reached)", aimed, want, kills, missed)
	}
	t.Logf("aimed-kill campaign: %d kills (%d aimed at an answer saved, not delivered, with follow-ups in flight); %d messages acknowledged: %d without an answer, %d answered twice (and %d posted again in the documented window), %d set aside",
		kills, aimed, len(chats), missing, twice, reposted, setAside)
}

// campaignSettled reports whether every question is answered in its chat
// and nothing is pending (Telegram, the inbox, a reply journaled as
// streaming).
func campaignSettled(w *cpWorld, chats map[string]int64) bool {
	if w.srv.Pending() != 0 || cpInboxPending(w.data) != 0 {
		return false
	}
	if n, _ := crashOpenReplies(w.data); n != 0 {
		return false
	}
	said := map[int64]string{}
	for id, chat := range chats {
		if _, ok := said[chat]; !ok {
			said[chat] = chatText(w, chat)
		}
		if markCount(said[chat], "END-"+id) == 0 {
			return false
		}
	}
	return true
}

// markCount counts the words mark in text (END-q1 is not in END-q12).
func markCount(text, mark string) int {
	return len(regexp.MustCompile(`\b`+regexp.QuoteMeta(mark)+`\b`).FindAllStringIndex(text, -1))
}

// chatText is the bot's visible messages in chat.
func chatText(w *cpWorld, chat int64) string {
	var all []string
	for _, m := range w.srv.Messages(chat) {
		all = append(all, m.Text)
	}
	return strings.Join(all, "\n---\n")
}

// campaignAimed reports whether one of the session files, as a kill left
// them, holds a final answer after its last recorded delivery, followed
// by a user message: an answer saved, not delivered, with a follow-up in
// flight.
func campaignAimed(files map[string]string) bool {
	for _, content := range files {
		answered, followed := false, false
		for line := range strings.SplitSeq(content, "\n") {
			var e struct {
				Type       string `json:"type"`
				CustomType string `json:"customType"`
				Message    *struct {
					Role       string `json:"role"`
					StopReason string `json:"stopReason"`
				} `json:"message"`
			}
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			switch {
			case e.CustomType == "pibot.delivery":
				answered, followed = false, false
			case e.Type != "message" || e.Message == nil:
			case e.Message.Role == "assistant" && e.Message.StopReason != "toolUse":
				answered = true
			case e.Message.Role == "user" && answered:
				followed = true
			}
		}
		if answered && followed {
			return true
		}
	}
	return false
}
