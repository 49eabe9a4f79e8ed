package slacktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Say is a message a user posts.
type Say struct {
	Channel string
	// ChannelType is "im", "mpim", "channel" or "group"; default from the
	// channel id ("D…" im, else channel).
	ChannelType string
	User        string
	Text        string
	// ThreadTS puts the message in the thread of that message.
	ThreadTS string
	Files    []map[string]any // from AddFile
	// Subtype, e.g. "message_changed" or "bot_message"; BotID marks a bot.
	Subtype string
	BotID   string
}

// Post records a user's message in the channel's history and returns its
// ts and the Events API bodies Slack sends for it: a message event, and
// for a mention of the bot outside a DM also the app_mention twin (same
// channel and ts, another event id).
func (s *Server) Post(m Say) (string, [][]byte) {
	ct := m.ChannelType
	if ct == "" {
		ct = "channel"
		if strings.HasPrefix(m.Channel, "D") {
			ct = "im"
		}
	}
	s.mu.Lock()
	ts := s.nextTS()
	s.msgs[m.Channel] = append(s.msgs[m.Channel], &Message{Channel: m.Channel, TS: ts, ThreadTS: m.ThreadTS, User: m.User, Text: m.Text})
	s.mu.Unlock()
	ev := map[string]any{"type": "message", "channel": m.Channel, "channel_type": ct, "user": m.User, "text": m.Text,
		"ts": ts, "event_ts": ts, "team": s.TeamID}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
	}
	if len(m.Files) > 0 {
		ev["files"] = m.Files
		ev["subtype"] = "file_share"
	}
	if m.Subtype != "" {
		ev["subtype"] = m.Subtype
	}
	if m.BotID != "" {
		ev["bot_id"] = m.BotID
	}
	bodies := [][]byte{s.Callback(ev)}
	if ct != "im" && strings.Contains(m.Text, "<@"+s.BotUserID+">") {
		twin := map[string]any{}
		for k, v := range ev {
			if k != "channel_type" && k != "subtype" {
				twin[k] = v
			}
		}
		twin["type"] = "app_mention"
		bodies = append(bodies, s.Callback(twin))
	}
	return ts, bodies
}

// Callback wraps an inner event in an event_callback body with a new
// event id.
func (s *Server) Callback(inner map[string]any) []byte {
	s.mu.Lock()
	id := s.id("Ev")
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"token": "unused-verification-token", "team_id": s.TeamID, "api_app_id": "A0001",
		"type": "event_callback", "event_id": id, "event_time": time.Now().Unix(), "event": inner})
	return b
}

// SlashCommand returns the payload of the slash command command (with
// text) typed by user in channel, with a response URL on this server.
func (s *Server) SlashCommand(channel, user, command, text string) url.Values {
	s.mu.Lock()
	rid := s.id("R")
	trigger := s.id("trig")
	s.responses[rid] = &response{channel: channel, user: user}
	s.mu.Unlock()
	return url.Values{"token": {"unused"}, "team_id": {s.TeamID}, "channel_id": {channel}, "channel_name": {"x"},
		"user_id": {user}, "user_name": {"u-" + user}, "command": {command}, "text": {text},
		"response_url": {s.URL + "/response/" + rid}, "trigger_id": {trigger}, "api_app_id": {"A0001"}}
}

// SlashJSON is SlashCommand as the JSON payload of a Socket Mode envelope.
func SlashJSON(v url.Values) []byte {
	m := map[string]string{}
	for k := range v {
		m[k] = v.Get(k)
	}
	b, _ := json.Marshal(m)
	return b
}

// Press returns the block_actions payload of user pressing the button
// actionID of the bot's message ts in channel, or false if the message has
// no such button.
func (s *Server) Press(channel, ts, user, actionID string) ([]byte, bool) {
	s.mu.Lock()
	m := s.find(channel, ts)
	if m == nil {
		s.mu.Unlock()
		return nil, false
	}
	found := false
	for _, b := range m.Buttons {
		found = found || b == actionID
	}
	rid, trigger := s.id("R"), s.id("trig")
	s.responses[rid] = &response{channel: channel, user: user, thread: m.ThreadTS}
	msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": m.User, "blocks": m.Blocks}
	if m.ThreadTS != "" {
		msg["thread_ts"] = m.ThreadTS
	}
	if len(m.Blocks) == 0 {
		delete(msg, "blocks")
	}
	s.mu.Unlock()
	if !found {
		return nil, false
	}
	container := map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	b, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": trigger, "response_url": s.URL + "/response/" + rid,
		"team": map[string]any{"id": s.TeamID}, "user": map[string]any{"id": user, "name": "u-" + user},
		"channel": map[string]any{"id": channel}, "container": container, "message": msg, "api_app_id": "A0001",
		"actions": []map[string]any{{"type": "button", "action_id": actionID, "block_id": "pibot_actions",
			"value": actionID, "action_ts": strconv.FormatInt(time.Now().Unix(), 10)}},
	})
	return b, true
}

// Sign returns the X-Slack-Signature of body at ts with secret.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	_, _ = mac.Write([]byte("v0:" + strconv.FormatInt(ts, 10) + ":"))
	_, _ = mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// Request builds a delivery to pibot's events URL: JSON bodies (Events
// API) as application/json, url.Values (slash commands) as a form, and
// an interaction payload as the form field payload. It is signed with the
// server's signing secret at now; retry > 0 adds X-Slack-Retry-Num.
func (s *Server) Request(eventsURL string, body any, retry int) *http.Request {
	var raw []byte
	ct := "application/x-www-form-urlencoded"
	switch b := body.(type) {
	case url.Values:
		raw = []byte(b.Encode())
	case Interaction:
		raw = []byte(url.Values{"payload": {string(b)}}.Encode())
	case []byte:
		raw, ct = b, "application/json"
	}
	r, _ := http.NewRequest(http.MethodPost, eventsURL, bytes.NewReader(raw))
	r.Header.Set("Content-Type", ct)
	ts := time.Now().Unix()
	r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	r.Header.Set("X-Slack-Signature", Sign(s.SigningSecret, ts, raw))
	if retry > 0 {
		r.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
		r.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	return r
}

// Interaction is a block_actions payload (from Press) for Request.
type Interaction []byte
