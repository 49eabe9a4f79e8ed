package config

import (
	"net/url"
	"strings"
)

// Enabled reports whether a Slack bot token is configured.
func (s Slack) Enabled() bool { return s.BotToken != "" || s.BotTokenFile != "" }

// validate checks adapters.slack.*: the mode, the token each mode needs,
// the API URL and the slash command; listen is http.listen, which http
// mode needs.
func (s Slack) validate(listen string, bad func(key, format string, args ...any)) {
	if s == (Slack{}) {
		return
	}
	set := func(v, file string) bool { return v != "" || file != "" }
	if !s.Enabled() {
		if set(s.AppToken, s.AppTokenFile) || set(s.SigningSecret, s.SigningSecretFile) {
			bad("adapters.slack.bot_token", "required when adapters.slack has other tokens (the xoxb- bot token of the app; or bot_token_file)")
		}
		if s.Mode != "" && s.Mode != "socket" && s.Mode != "http" {
			bad("adapters.slack.mode", "%q is not one of socket, http", s.Mode)
		}
		return
	}
	for key, both := range map[string]bool{
		"adapters.slack.bot_token":      s.BotToken != "" && s.BotTokenFile != "",
		"adapters.slack.app_token":      s.AppToken != "" && s.AppTokenFile != "",
		"adapters.slack.signing_secret": s.SigningSecret != "" && s.SigningSecretFile != "",
	} {
		if both {
			bad(key, "set either %s or %s_file, not both", key, key)
		}
	}
	switch s.Mode {
	case "", "socket":
		if !set(s.AppToken, s.AppTokenFile) {
			bad("adapters.slack.app_token", "required in socket mode (the xapp- app-level token with connections:write; or app_token_file)")
		}
	case "http":
		if !set(s.SigningSecret, s.SigningSecretFile) {
			bad("adapters.slack.signing_secret", "required in http mode (Basic Information → Signing Secret; or signing_secret_file)")
		}
		if listen == "" {
			bad("http.listen", "required when adapters.slack.mode is http (Slack posts to /slack/events there)")
		}
	default:
		bad("adapters.slack.mode", "%q is not one of socket, http", s.Mode)
	}
	if s.APIURL != "" {
		if u, err := url.Parse(s.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("adapters.slack.api_url", "%q is not an http(s) URL", s.APIURL)
		} else if !strings.HasSuffix(s.APIURL, "/") {
			bad("adapters.slack.api_url", "%q must end with a slash, like https://slack.com/api/", s.APIURL)
		}
	}
	if s.Command != "" && !validSlashCommand(s.Command) {
		bad("adapters.slack.command", "%q must be / and 1-31 characters of a-z, 0-9, -, _ (like /pi)", s.Command)
	}
}

func validSlashCommand(s string) bool {
	if len(s) < 2 || len(s) > 32 || s[0] != '/' {
		return false
	}
	for _, r := range s[1:] {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
