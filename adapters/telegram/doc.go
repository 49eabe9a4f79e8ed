// Package telegram is pibot's Telegram adapter: it implements chat.Adapter
// and the optional Typer, Streamer (drafts in private chats), Responder
// (callback queries), Uploader, Downloader, CommandRegistrar, Reactor and
// Deleter on top of github.com/go-telegram/bot. It has no ephemeral
// messages (Out.Ephemeral posts a normal message) and no thread opener
// (forum topics are made by people). Every outbound call works whether or
// not Run is active in this process.
//
// Updates arrive by long polling (its own getUpdates loop, which confirms
// an update only after the gateway's sink made it durable, and backs off on
// 409 Conflict) or by webhook (WebhookHandler, secret-token checked before
// parsing, 200 only after the sink returned nil).
//
// Outbound calls go through one pacing layer: a token bucket per chat
// (1/s in private chats, 20/min in groups) and one for the bot (30/s), a
// bot-wide pause after any 429 (retry_after), retries with back-off for
// 5xx and network errors, HTML with a plain-text fallback when Telegram
// cannot parse the entities. Every error and log line has the bot token
// removed: the token is part of every Bot API URL.
package telegram
