package transcript

import (
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// treeWidth is how many runes of a message name a branch or a thread,
// as pibot's /tree shows its turns.
const treeWidth = 50

// turnText names a user message as /tree does: its text as plain text on
// one line, at most treeWidth runes.
func turnText(m *llm.Message) string {
	if t := chat.Line(m.Text(), treeWidth); t != "" {
		return t
	}
	return "(no text)"
}

// platformName is a chat platform's name for people, and what a
// conversation there is called ("" when its id says nothing to people).
func platformName(platform string) (name, conv string) {
	switch platform {
	case "web":
		return "web chat", ""
	case "term":
		return "terminal", ""
	case "telegram":
		return "Telegram", "chat"
	case "slack":
		return "Slack", "channel"
	case "discord":
		return "Discord", "channel"
	}
	return platform, "conversation"
}

// placeNames names the chat locations whose heads s records, for people:
// "web chat", "web chat, thread “why is the sky blue?”", "Slack channel
// C1". A thread is named after its first message, as /tree shows it.
func placeNames(s *session.Tree, heads map[string]string) map[string]string {
	threads := map[string]string{}
	for loc := range heads {
		if _, _, thread := splitLoc(loc); thread != "" {
			threads[loc] = ""
		}
	}
	if len(threads) > 0 {
		for _, e := range s.Entries() {
			if e.Pibot == nil || e.Type != session.TypeMessage || e.Message == nil || e.Message.Role != llm.RoleUser {
				continue
			}
			if title, ok := threads[e.Pibot.Loc]; ok && title == "" {
				threads[e.Pibot.Loc] = turnText(e.Message)
			}
		}
	}
	out := make(map[string]string, len(heads))
	for loc := range heads {
		out[loc] = placeName(loc, threads[loc])
	}
	return out
}

// placeName names location loc ("platform:workspace:channel[:thread]"),
// a thread by title.
func placeName(loc, title string) string {
	platform, channel, thread := splitLoc(loc)
	if platform == "" {
		return loc
	}
	name, conv := platformName(platform)
	if conv != "" {
		name += " " + conv + " " + channel
	}
	switch {
	case thread != "" && title != "":
		name += ", thread “" + title + "”"
	case thread != "":
		name += ", a thread"
	}
	return name
}

// splitLoc splits a location key into its platform, channel and thread;
// platform is "" when loc is no location key.
func splitLoc(loc string) (platform, channel, thread string) {
	platform, rest, ok := strings.Cut(loc, ":")
	parts := strings.SplitN(rest, ":", 3)
	if !ok || platform == "" || len(parts) < 2 || parts[1] == "" {
		return "", "", ""
	}
	if len(parts) == 3 {
		thread = parts[2]
	}
	return platform, parts[1], thread
}
