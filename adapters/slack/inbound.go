package slack

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/chat"
)

// responseWindow is how long a response_url takes answers (Slack: 30
// minutes, at most 5 answers).
const responseWindow = 30 * time.Minute

// reader turns Slack deliveries (events, slash commands, button presses)
// into chat.Inbound. It knows the bot's identity (from auth.test) and the
// gateway's command names; it is safe for concurrent use.
type reader struct {
	log *slog.Logger

	mu   sync.Mutex
	me   identity
	cmds map[string]bool // the gateway's command names, for "!name" (nil: any)
}

// identity is the bot's own user and workspace, from auth.test, and its
// app, from Socket Mode's hello ("" in http mode: auth.test does not say).
type identity struct {
	userID string
	botID  string
	teamID string
	appID  string
}

func (a *reader) identity() identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.me
}

func (a *reader) setIdentity(me identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	me.appID = a.me.appID
	a.me = me
}

// setApp records the app's id (Socket Mode's hello names it).
func (a *reader) setApp(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.me.appID = id
}

// foreignError is a delivery of another workspace or app than the bot's
// own: an org-wide app's event from another workspace of the org, or one
// for another app. It is acknowledged and dropped.
type foreignError struct {
	team, app string
}

func (e *foreignError) Error() string {
	return "slack: a delivery for workspace " + e.team + ", app " + e.app + ", not this bot's"
}

// foreign returns a *foreignError when team or app (as a delivery names
// them; "" when it does not) differ from the bot's own (auth.test's team,
// the app Socket Mode connected as), nil otherwise.
func (a *reader) foreign(team, app string) error {
	me := a.identity()
	if (team != "" && me.teamID != "" && team != me.teamID) || (app != "" && me.appID != "" && app != me.appID) {
		return &foreignError{team: team, app: app}
	}
	return nil
}

// setCommands records the gateway's command names.
func (a *reader) setCommands(names []string) {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cmds = m
}

// outerEvent is an Events API delivery (HTTP body or Socket Mode payload).
type outerEvent struct {
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	TeamID    string          `json:"team_id"`
	APIAppID  string          `json:"api_app_id"`
	EventID   string          `json:"event_id"`
	Event     json.RawMessage `json:"event"`
}

// innerEvent is the part of a message or app_mention event pibot reads.
type innerEvent struct {
	Type        string     `json:"type"`
	Subtype     string     `json:"subtype"`
	User        string     `json:"user"`
	BotID       string     `json:"bot_id"`
	Text        string     `json:"text"`
	TS          string     `json:"ts"`
	ThreadTS    string     `json:"thread_ts"`
	Channel     string     `json:"channel"`
	ChannelType string     `json:"channel_type"`
	Team        string     `json:"team"`
	Files       []fileInfo `json:"files"`
}

// fileInfo is a file attached to a message.
type fileInfo struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

// errSkip marks a delivery with nothing for the gateway; it is still
// acknowledged.
var errSkip = errors.New("nothing for the gateway")

// event normalises an event_callback. Messages of bots (this one
// included), edits, deletions and other subtypes are skipped: an edited
// message is not run again.
func (a *reader) event(o outerEvent) (chat.Inbound, error) {
	var ev innerEvent
	if err := json.Unmarshal(o.Event, &ev); err != nil {
		return chat.Inbound{}, errors.New("slack: event: " + err.Error())
	}
	if ev.Type != "message" && ev.Type != "app_mention" {
		return chat.Inbound{}, errSkip
	}
	me := a.identity()
	switch {
	case ev.BotID != "" || ev.User == "" || ev.User == me.userID:
		return chat.Inbound{}, errSkip
	case ev.Subtype != "" && ev.Subtype != "file_share" && ev.Subtype != "thread_broadcast":
		return chat.Inbound{}, errSkip
	case ev.Channel == "" || ev.TS == "":
		return chat.Inbound{}, errSkip
	}
	team := o.TeamID
	if team == "" {
		team = ev.Team
	}
	if team == "" {
		team = me.teamID
	}
	c := chat.ConvRef{Platform: platform, Workspace: team, Channel: ev.Channel, DM: isIM(ev.Channel, ev.ChannelType)}
	if ev.ThreadTS != "" && ev.ThreadTS != ev.TS {
		c.Thread = ev.ThreadTS
	}
	text, mentioned := plainText(ev.Text, me.userID)
	in := chat.Inbound{
		Kind:      chat.KindMessage,
		Conv:      c,
		Msg:       chat.MsgRef{Conv: c, ID: ev.TS},
		User:      chat.User{ID: ev.User},
		Text:      text,
		Mentioned: c.DM || mentioned || ev.Type == "app_mention",
		DedupKey:  dedupKey(team, ev.Channel, ev.TS),
		Time:      tsTime(ev.TS),
		Files:     files(ev.Files),
	}
	if in.Text == "" && len(in.Files) == 0 {
		return chat.Inbound{}, errSkip
	}
	// Slack sends no slash commands from threads: "!stop" there (and
	// anywhere) is the same command. "!" before a word that is no command
	// ("!important") is just text.
	in.Command = chat.ParseCommandPrefix(text, "", "!", "/")
	if in.Command != nil && strings.HasPrefix(text, "!") && !a.isCommand(in.Command.Name) {
		in.Command = nil
	}
	return in, nil
}

// dedupKey identifies a message across retries and the message +
// app_mention pair of one mention.
func dedupKey(team, channel, ts string) string {
	return "slack:" + team + ":" + channel + ":" + ts
}

// isIM reports a one-to-one DM: channel_type im, or a D… channel id (an
// app_mention carries no channel_type). Group DMs (mpim) are channels.
func isIM(channel, channelType string) bool {
	if channelType != "" {
		return channelType == "im"
	}
	return strings.HasPrefix(channel, "D")
}

// tsTime is the time of a Slack ts ("1700000000.000100").
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Now()
	}
	us, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	return time.Unix(s, us*1000)
}

// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var entityRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`) })

// plainText turns Slack's message text into plain text: the bot's mention
// removed (reported), other mentions and links as readable text, and
// &amp; &lt; &gt; unescaped.
func plainText(s, botUser string) (string, bool) {
	mentioned := false
	s = entityRE().ReplaceAllStringFunc(s, func(m string) string {
		sub := entityRE().FindStringSubmatch(m)
		target, label := sub[1], sub[2]
		switch {
		case botUser != "" && target == "@"+botUser:
			mentioned = true
			return ""
		case strings.HasPrefix(target, "@"), strings.HasPrefix(target, "#"):
			if label != "" {
				return target[:1] + label
			}
			return target
		case strings.HasPrefix(target, "!"):
			if label != "" {
				return "@" + label
			}
			return "@" + strings.TrimPrefix(target, "!")
		case label != "" && label != target && strings.TrimPrefix(target, "mailto:") != label:
			return label + " (" + target + ")"
		default:
			return strings.TrimPrefix(target, "mailto:")
		}
	})
	s = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
	return strings.TrimSpace(s), mentioned
}

// files lists the attachments of a message. FileRef.ID is the private
// download URL (fetched with the bot token; see Download).
func files(in []fileInfo) []chat.FileRef {
	var out []chat.FileRef
	for _, f := range in {
		u := f.URLPrivateDownload
		if u == "" {
			u = f.URLPrivate
		}
		if u == "" {
			continue
		}
		kind := "document"
		if strings.HasPrefix(f.Mimetype, "image/") {
			kind = "photo"
		}
		out = append(out, chat.FileRef{ID: u, Name: f.Name, MimeType: f.Mimetype, Size: f.Size, Kind: kind})
	}
	return out
}

// slashCommand normalises a slash command: "/pi model x" is the command
// model with the arguments x; "/pi" alone is help. In a channel it applies
// to the thread a permalink at the end of the arguments names, else the
// gateway takes the channel's most recent conversation.
func (a *reader) slashCommand(sc slackapi.SlashCommand) (chat.Inbound, error) {
	if sc.ChannelID == "" || sc.UserID == "" || sc.TriggerID == "" {
		return chat.Inbound{}, errors.New("slack: slash command without channel, user or trigger id")
	}
	if err := a.foreign(sc.TeamID, sc.APIAppID); err != nil {
		return chat.Inbound{}, err
	}
	team := sc.TeamID
	if team == "" {
		team = a.identity().teamID
	}
	c := chat.ConvRef{Platform: platform, Workspace: team, Channel: sc.ChannelID, DM: isIM(sc.ChannelID, "")}
	text := strings.TrimSpace(sc.Text)
	name, args, _ := strings.Cut(text, " ")
	args = strings.TrimSpace(args)
	if thread, rest, ok := namedThread(args, sc.ChannelID); ok {
		c.Thread, args = thread, rest
	}
	name = strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(name, "/"), "!"))
	if name == "" {
		name = "help"
	}
	now := time.Now()
	return chat.Inbound{
		Kind:      chat.KindMessage,
		Conv:      c,
		Msg:       chat.MsgRef{Conv: c},
		User:      chat.User{ID: sc.UserID, Name: sc.UserName},
		Text:      strings.TrimSpace("/" + name + " " + args),
		Mentioned: true,
		Command:   &chat.Command{Name: name, Args: args},
		Interaction: &chat.Interaction{Platform: platform, ID: sc.TriggerID, ResponseURL: sc.ResponseURL, Conv: c,
			User: sc.UserID, Deadline: now.Add(responseWindow)},
		DedupKey: "slack:" + team + ":cmd:" + sc.TriggerID,
		Time:     now,
	}, nil
}

// namedThread finds a permalink to a message of channel as the last word
// of args ("/pi stop https://x.slack.com/archives/C1/p1700000000000100")
// and returns the thread it names and args without it.
func namedThread(args, channel string) (string, string, bool) {
	i := strings.LastIndexAny(args, " \t")
	last := strings.Trim(args[i+1:], "<>")
	u, err := url.Parse(last)
	if err != nil || u.Scheme != "https" {
		return "", "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 3 || parts[0] != "archives" || parts[1] != channel || len(parts[2]) < 8 || parts[2][0] != 'p' {
		return "", "", false
	}
	ts := u.Query().Get("thread_ts")
	if ts == "" {
		p := parts[2][1:]
		if _, err := strconv.ParseUint(p, 10, 64); err != nil || len(p) <= 6 {
			return "", "", false
		}
		ts = p[:len(p)-6] + "." + p[len(p)-6:]
	}
	return ts, strings.TrimSpace(args[:i+1]), true
}

// interaction normalises a block_actions press of one of the bot's
// buttons. Interaction.Data keeps the message's text, so that an answer
// may replace only the buttons.
func (a *reader) interaction(cb slackapi.InteractionCallback) (chat.Inbound, error) {
	if err := a.foreign(cb.Team.ID, cb.APIAppID); err != nil {
		return chat.Inbound{}, err
	}
	if cb.Type != slackapi.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return chat.Inbound{}, errSkip
	}
	act := cb.ActionCallback.BlockActions[0]
	channel := cb.Container.ChannelID
	if channel == "" {
		channel = cb.Channel.ID
	}
	if channel == "" || cb.User.ID == "" || cb.TriggerID == "" {
		return chat.Inbound{}, errors.New("slack: button press without channel, user or trigger id")
	}
	team := cb.Team.ID
	if team == "" {
		team = a.identity().teamID
	}
	c := chat.ConvRef{Platform: platform, Workspace: team, Channel: channel, DM: isIM(channel, "")}
	ts := cb.Container.MessageTs
	if ts == "" {
		ts = cb.Message.Timestamp
	}
	if th := cb.Container.ThreadTs; th != "" && th != ts {
		c.Thread = th
	} else if th := cb.Message.ThreadTimestamp; th != "" && th != ts {
		c.Thread = th
	}
	msg := chat.MsgRef{Conv: c, ID: ts}
	data := act.Value
	if data == "" {
		data = act.ActionID
	}
	now := time.Now()
	return chat.Inbound{
		Kind:      chat.KindAction,
		Conv:      c,
		Msg:       msg,
		User:      chat.User{ID: cb.User.ID, Name: cb.User.Name},
		Mentioned: true,
		Action:    &chat.Action{Data: data, Msg: msg},
		Interaction: &chat.Interaction{Platform: platform, ID: cb.TriggerID, ResponseURL: cb.ResponseURL, Conv: c, Msg: msg,
			User: cb.User.ID, Deadline: now.Add(responseWindow), Data: cb.Message.Text},
		DedupKey: "slack:" + team + ":act:" + cb.TriggerID,
		Time:     now,
	}, nil
}

// eventBody normalises an Events API body.
func (a *reader) eventBody(body []byte) (chat.Inbound, error) {
	var o outerEvent
	if err := json.Unmarshal(body, &o); err != nil {
		return chat.Inbound{}, errors.New("slack: event is not JSON: " + err.Error())
	}
	if o.Type != "event_callback" {
		if o.Type == "app_rate_limited" {
			a.log.Warn("slack: Slack dropped events: the app passed 30,000 events an hour in the workspace")
		}
		return chat.Inbound{}, errSkip
	}
	if err := a.foreign(o.TeamID, o.APIAppID); err != nil {
		return chat.Inbound{}, err
	}
	return a.event(o)
}

// interactionBody normalises an interaction payload.
func (a *reader) interactionBody(payload []byte) (chat.Inbound, error) {
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal(payload, &cb); err != nil {
		return chat.Inbound{}, errors.New("slack: interaction is not JSON: " + err.Error())
	}
	return a.interaction(cb)
}

// isCommand reports whether name is one of the gateway's commands (any
// name until the gateway registered them).
func (a *reader) isCommand(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cmds == nil || a.cmds[name]
}
