// Package discord is pibot's Discord adapter: it implements chat.Adapter
// and the optional Responder (deferred interaction answers, follow-ups and
// edits through the interaction token), CommandRegistrar (one application
// command with a subcommand per gateway command, per guild or global),
// ThreadOpener (a mention in a channel opens a thread on that message),
// Uploader, Downloader, Typer, Reactor, Deleter and Singleton on top of
// github.com/bwmarrin/discordgo's REST client.
//
// The gateway websocket is this package's own client (gateway.go): it
// identifies with GUILD_MESSAGES, DIRECT_MESSAGES and MESSAGE_CONTENT,
// resumes a dropped session (op 6) instead of identifying again, spaces
// identifies out with a growing back-off, drops a MESSAGE_CREATE it has
// already delivered (a replay around a resume), and stops for good on a
// refused token (close code 4004, REST 401) or a refused privileged intent
// (4014) with one clear log line and a failed Health, while pibot and its
// other adapters keep running.
//
// REST calls go through the session's http.Client, whose transport
// rewrites https://discord.com to adapters.discord.api_url and reads every
// answer: a 429 (retry_after in the body or the Retry-After header, per
// route or global) pauses that route or every route, and no call goes out
// to it inside the window; 5xx and network failures are retried a bounded
// number of times for sends only; discordgo's own endless 429 retries are
// off. The token is a secret.Secret, never logged; discordgo's logger is
// silenced (its debug level would print the IDENTIFY payload).
package discord
