package discord

import "github.com/pibot/pibot/chat"

// The gateway (and cmd/pibot, for Health) finds optional abilities by type
// assertion; these guards make losing one a compile error instead of a
// silent downgrade.
var (
	_ chat.Adapter          = (*Adapter)(nil)
	_ chat.Deleter          = (*Adapter)(nil)
	_ chat.Responder        = (*Adapter)(nil)
	_ chat.Typer            = (*Adapter)(nil)
	_ chat.Reactor          = (*Adapter)(nil)
	_ chat.Uploader         = (*Adapter)(nil)
	_ chat.Downloader       = (*Adapter)(nil)
	_ chat.CommandRegistrar = (*Adapter)(nil)
	_ chat.ThreadOpener     = (*Adapter)(nil)
	_ chat.Singleton        = (*Adapter)(nil)
	_ chat.HealthReporter   = (*Adapter)(nil)
)

// SingletonKey names the lease the gateway connection runs under: one
// replica holds the bot's gateway session (one shard). The key holds the
// application id when configured, else a hash of the token, never the
// token.
func (a *Adapter) SingletonKey() string {
	if a.cfg.ApplicationID != "" {
		return "discord/gateway/" + a.cfg.ApplicationID
	}
	return "discord/gateway/" + shortHash(a.cfg.Token.Reveal())
}
