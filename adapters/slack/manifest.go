package slack

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Scopes are the bot scopes pibot needs, each for one reason:
//
//	app_mentions:read  mentions in channels (app_mention)
//	channels:history   thread replies without a mention in public channels
//	groups:history     the same in private channels
//	im:history         DMs
//	mpim:history       group DMs
//	chat:write         posting, updating and streaming replies
//	commands           the slash command
//	files:read         files users attach
//	files:write        files the agent sends (the attach tool)
//	reactions:write    receipts on messages (👀, ✅)
//	assistant:write    the assistant status ("is running `go test`…")
var Scopes = []string{
	"app_mentions:read", "channels:history", "groups:history", "im:history", "mpim:history",
	"chat:write", "commands", "files:read", "files:write", "reactions:write", "assistant:write",
}

// Events are the bot events pibot subscribes to.
var Events = []string{"app_mention", "message.channels", "message.groups", "message.im", "message.mpim"}

// ManifestOptions says what app ManifestFor describes.
type ManifestOptions struct {
	// Name is the app's and bot's display name; default "pibot".
	Name string
	// Command is the slash command; default "/pi".
	Command string
	// Mode is "socket" (default) or "http".
	Mode string
	// PublicURL is pibot's public https base URL, required in http mode:
	// Slack posts events, commands and interactivity to PublicURL +
	// EventsPath.
	PublicURL string
}

// Manifest is a Slack app manifest (the JSON form api.slack.com/apps
// accepts; YAML with the same keys works too).
type Manifest struct {
	DisplayInformation struct {
		Name        string `json:"name" yaml:"name"`
		Description string `json:"description" yaml:"description"`
	} `json:"display_information" yaml:"display_information"`
	Features struct {
		AppHome struct {
			HomeTabEnabled             bool `json:"home_tab_enabled" yaml:"home_tab_enabled"`
			MessagesTabEnabled         bool `json:"messages_tab_enabled" yaml:"messages_tab_enabled"`
			MessagesTabReadOnlyEnabled bool `json:"messages_tab_read_only_enabled" yaml:"messages_tab_read_only_enabled"`
		} `json:"app_home" yaml:"app_home"`
		BotUser struct {
			DisplayName  string `json:"display_name" yaml:"display_name"`
			AlwaysOnline bool   `json:"always_online" yaml:"always_online"`
		} `json:"bot_user" yaml:"bot_user"`
		SlashCommands []SlashCommandSpec `json:"slash_commands" yaml:"slash_commands"`
	} `json:"features" yaml:"features"`
	OAuthConfig struct {
		Scopes struct {
			Bot []string `json:"bot" yaml:"bot"`
		} `json:"scopes" yaml:"scopes"`
	} `json:"oauth_config" yaml:"oauth_config"`
	Settings struct {
		EventSubscriptions struct {
			RequestURL string   `json:"request_url,omitempty" yaml:"request_url,omitempty"`
			BotEvents  []string `json:"bot_events" yaml:"bot_events"`
		} `json:"event_subscriptions" yaml:"event_subscriptions"`
		Interactivity struct {
			IsEnabled  bool   `json:"is_enabled" yaml:"is_enabled"`
			RequestURL string `json:"request_url,omitempty" yaml:"request_url,omitempty"`
		} `json:"interactivity" yaml:"interactivity"`
		OrgDeployEnabled     bool `json:"org_deploy_enabled" yaml:"org_deploy_enabled"`
		SocketModeEnabled    bool `json:"socket_mode_enabled" yaml:"socket_mode_enabled"`
		TokenRotationEnabled bool `json:"token_rotation_enabled" yaml:"token_rotation_enabled"`
	} `json:"settings" yaml:"settings"`
}

// SlashCommandSpec is one slash command of a manifest.
type SlashCommandSpec struct {
	Command      string `json:"command" yaml:"command"`
	URL          string `json:"url,omitempty" yaml:"url,omitempty"`
	Description  string `json:"description" yaml:"description"`
	UsageHint    string `json:"usage_hint" yaml:"usage_hint"`
	ShouldEscape bool   `json:"should_escape" yaml:"should_escape"`
}

// ManifestFor returns the manifest of an app with exactly the scopes,
// events, slash command and Socket Mode setting pibot needs.
func ManifestFor(o ManifestOptions) (Manifest, error) {
	var m Manifest
	if o.Name == "" {
		o.Name = "pibot"
	}
	if o.Command == "" {
		o.Command = "/pi"
	}
	reqURL := ""
	switch o.Mode {
	case "", ModeSocket:
		m.Settings.SocketModeEnabled = true
	case ModeHTTP:
		u, err := url.Parse(o.PublicURL)
		if o.PublicURL == "" || err != nil || u.Scheme != "https" || u.Host == "" {
			return m, errors.New("slack manifest: http mode needs pibot's public https URL (--url https://pibot.example.com)")
		}
		reqURL = strings.TrimRight(o.PublicURL, "/") + EventsPath
	default:
		return m, fmt.Errorf("slack manifest: mode %q must be %q or %q", o.Mode, ModeSocket, ModeHTTP)
	}
	m.DisplayInformation.Name = o.Name
	m.DisplayInformation.Description = "A coding agent in Slack: DM it, or mention it in a channel; threads are branches."
	m.Features.AppHome.MessagesTabEnabled = true
	m.Features.BotUser.DisplayName = o.Name
	m.Features.BotUser.AlwaysOnline = true
	m.Features.SlashCommands = []SlashCommandSpec{{Command: o.Command, URL: reqURL,
		Description: "Control pibot: stop, new, status, model, help", UsageHint: "stop | new | status | model [name] | help"}}
	m.OAuthConfig.Scopes.Bot = append([]string(nil), Scopes...)
	m.Settings.EventSubscriptions.RequestURL = reqURL
	m.Settings.EventSubscriptions.BotEvents = append([]string(nil), Events...)
	m.Settings.Interactivity.IsEnabled = true
	m.Settings.Interactivity.RequestURL = reqURL
	return m, nil
}
