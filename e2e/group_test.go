package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/providers/faux"
)

// In a group pibot answers only when mentioned or replied to, and only in
// groups the access policy allows.
func TestGroupMentionGating(t *testing.T) {
	t.Parallel()
	const otherGroup int64 = -2999
	w := newWorld(t, []faux.Turn{faux.Text("group answer one"), faux.Text("group answer two")})
	w.srv.AddChat(models.Chat{ID: groupChat, Type: models.ChatTypeGroup, Title: "team"})
	w.srv.AddChat(models.Chat{ID: otherGroup, Type: models.ChatTypeGroup, Title: "strangers"})

	w.say(groupChat, bob, "just chatting among ourselves")
	w.say(otherGroup, bob, "@"+botName+" answer me here")
	w.say(groupChat, bob, "hey @someone_else, lunch?")
	asked := w.say(groupChat, bob, "@"+botName+" what is up?")
	one := w.waitMessage(groupChat, "group answer one")
	// Updates are handled in order, so everything before the mention has
	// been decided on by now.
	reqs := w.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model calls = %d, want 1 (unmentioned and unlisted-group messages are ignored)", len(reqs))
	}
	if got, want := requestTexts(reqs[0]), []string{"user:what is up?"}; !slices.Equal(got, want) {
		t.Errorf("request = %q, want %q (mention stripped, no group chatter)", got, want)
	}
	if one.ReplyTo != asked.ID {
		t.Errorf("answer replies to %d, want %d", one.ReplyTo, asked.ID)
	}
	if n := len(w.srv.Messages(otherGroup)); n != 0 {
		t.Errorf("pibot posted %d messages in a group that is not allowed", n)
	}

	w.say(groupChat, bob, "more chatter")
	followUp := w.say(groupChat, bob, "and then?", w.replyingTo(one.ID))
	two := w.waitMessage(groupChat, "group answer two")
	if two.ReplyTo != followUp.ID {
		t.Errorf("second answer replies to %d, want %d", two.ReplyTo, followUp.ID)
	}
	reqs = w.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	want := []string{"user:what is up?", "assistant:group answer one", "user:and then?"}
	if got := requestTexts(reqs[1]); !slices.Equal(got, want) {
		t.Errorf("request = %q, want %q", got, want)
	}
	if got := texts(w.srv.Messages(groupChat)); !slices.Equal(got, []string{"group answer one", "group answer two"}) {
		t.Errorf("bot messages in the group = %q", got)
	}
	w.never("a late answer to group chatter", 300*time.Millisecond, func() bool { return w.model.Calls() > 2 })
}

// A forum topic is a location of its own: its own session, and replies in
// the topic carry its message_thread_id while the general chat's do not.
func TestForumTopicIsItsOwnLocation(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []faux.Turn{faux.Text("general answer"), faux.Text("topic answer")})
	w.srv.AddChat(models.Chat{ID: forumChat, Type: models.ChatTypeSupergroup, Title: "forum", IsForum: true})

	w.say(forumChat, owner, "@"+botName+" general question")
	general := w.waitMessage(forumChat, "general answer")
	if general.ThreadID != 0 {
		t.Errorf("general answer went to thread %d", general.ThreadID)
	}
	w.waitBranch(locKey(forumChat, 0), []string{"user:general question", "assistant:general answer"})

	// Creating a topic posts a service message whose id is the topic's id.
	created := w.srv.UserMessage(forumChat, owner, "")
	created.ForumTopicCreated = &models.ForumTopicCreated{Name: "deploys"}
	w.srv.AddMessage(created)
	topic := created.ID
	asked := w.say(forumChat, owner, "@"+botName+" topic question", inTopic(topic))
	answer := w.waitMessage(forumChat, "topic answer")
	if answer.ThreadID != topic {
		t.Errorf("topic answer went to thread %d, want %d", answer.ThreadID, topic)
	}
	if answer.ReplyTo != asked.ID {
		t.Errorf("topic answer replies to %d, want %d", answer.ReplyTo, asked.ID)
	}
	for _, c := range w.srv.Calls("sendMessage") {
		switch {
		case strings.Contains(c.Params["text"], "topic answer") && c.Params["message_thread_id"] != itoa(topic):
			t.Errorf("topic answer sent with message_thread_id %q, want %d", c.Params["message_thread_id"], topic)
		case strings.Contains(c.Params["text"], "general answer") && c.Params["message_thread_id"] != "" && c.Params["message_thread_id"] != "0":
			t.Errorf("general answer sent with message_thread_id %q", c.Params["message_thread_id"])
		}
	}

	reqs := w.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	if got, want := requestTexts(reqs[1]), []string{"user:topic question"}; !slices.Equal(got, want) {
		t.Errorf("topic request = %q, want %q (nothing from the general chat)", got, want)
	}
	w.waitBranch(locKey(forumChat, topic), []string{"user:topic question", "assistant:topic answer"})
	generalPath, _ := w.head(locKey(forumChat, 0))
	topicPath, _ := w.head(locKey(forumChat, topic))
	if generalPath == topicPath {
		t.Errorf("the topic shares the general chat's session file %s", topicPath)
	}
}
