// Package slack is pibot's Slack adapter: it implements chat.Adapter and
// the optional Streamer (chat.startStream / appendStream / stopStream, an
// append-only stream), Responder (response_url answers to slash commands
// and button presses), Uploader, Downloader, Typer (the assistant status,
// assistant.threads.setStatus), Reactor, Deleter, ThreadOpener and
// CommandRegistrar (which only learns the names that "!name" may take) on
// top of github.com/slack-go/slack. It knows nothing of agents or sessions.
//
// Events arrive through Socket Mode (slack-go's socketmode client; every
// envelope is acknowledged only after the gateway's sink made it durable)
// or over HTTP at POST /slack/events (EventsHandler: the v0 signature and
// the 5-minute timestamp window are checked before anything is parsed;
// 200 only once the sink returned nil). A message Slack sends twice (a
// retry, or the message + app_mention pair of one mention) carries one
// dedupe key, slack:<team>:<channel>:<ts>.
//
// Conversations: a DM's top-level messages are its main line, a thread in
// a DM is a branch from the message it hangs off; in channels and group
// DMs every conversation is a thread (ConvRef.Thread is the thread_ts, the
// ts of the message the thread hangs off). In threads, commands are typed
// with a "!" prefix (Slack sends no slash commands from threads); "!" before
// a word that is not a command is text.
//
// Outbound calls share one pacing layer: a workspace-wide token bucket per
// Web API method (Slack's tiers), a workspace-wide pause of a method after
// its 429 (Retry-After), retries for final deliveries, and errors from
// which the tokens are removed.
package slack
