package config

import (
	"fmt"
	"net/url"
)

// Enabled reports whether a Discord token is configured.
func (d Discord) Enabled() bool { return d.Token != "" || d.TokenFile != "" }

// validate checks adapters.discord.*; every problem names its key.
func (d Discord) validate(bad func(key, format string, args ...any)) {
	set := d.Token != "" || d.TokenFile != ""
	other := d.APIURL != "" || d.ApplicationID != "" || len(d.Guilds) > 0 || d.Command != ""
	if !set && other {
		bad("adapters.discord.token", "required when other adapters.discord keys are set (the bot token from the developer portal; or token_file)")
	}
	if d.APIURL != "" {
		if u, err := url.Parse(d.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("adapters.discord.api_url", "%q must be an http(s) base URL without a path (it replaces https://discord.com)", d.APIURL)
		}
	}
	if d.ApplicationID != "" && !isSnowflake(d.ApplicationID) {
		bad("adapters.discord.application_id", "%q is not a Discord id (digits; write it as a YAML string)", d.ApplicationID)
	}
	for i, g := range d.Guilds {
		if !isSnowflake(g) {
			bad(fmt.Sprintf("adapters.discord.guilds[%d]", i), "%q is not a Discord guild id (digits; write it as a YAML string)", g)
		}
	}
	if d.Command != "" && !isCommandName(d.Command) {
		bad("adapters.discord.command", "%q must be 1-32 characters of a-z, 0-9, _ and -", d.Command)
	}
}
