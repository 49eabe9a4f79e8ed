// Package web is pibot's local web chat adapter: a single-page chat UI
// embedded in the binary (no build step) and a small JSON + Server-Sent
// Events API, mounted by the server on its shared HTTP listener.
//
// The browser posts messages to /api/send and button presses to
// /api/action; both return 200 only after the gateway's sink has accepted
// the event. Outbound messages, edits, status lines and toasts are kept in a
// bounded per-conversation log and pushed to /api/events as Server-Sent
// Events; a reconnecting browser replays what it missed from its last event
// id. A conversation's threads are branches of its session: starting a
// thread from an earlier message sends the first message of the new thread
// with ReplyTo set to that message.
//
// The page is rebuilt from the conversation's session whenever it loads
// (and after a pibot restart or a branch move): the adapter implements
// chat.HistoryUser, and /api/history and /api/conversations answer from
// the chat.History the gateway hands it, bound to the web platform. The
// adapter asks for a status line beside the reply (chat.Caps.StatusLine),
// refreshed every second; each status event carries when its text began,
// so the page shows how long the agent has been at it. /api/info gives the
// page Config.Notice, which an empty conversation shows (cmd/pibot: what to
// configure when no model is).
//
// A message the gateway did not take shows why beside it, in words for
// the cause (never the error's text, which is logged), with Retry, which
// sends it again under the same id. The adapter is a chat.HealthShower:
// what the gateway reports wrong ("storage unavailable, retrying" while
// the shared store is down) goes to every stream as a {"type":"health"}
// event, and the header shows it beside "connected".
//
// In cluster mode (Config.Bus) every change to a conversation log is
// published to the other replicas' web chats, which apply it to their own
// logs: a browser connected to any replica sees the replies of whichever
// replica runs its conversation.
//
// The chat is meant for loopback. On any other address a token is
// required (see RequireToken); it is checked on every request, either as
// a bearer token or as the cookie set by visiting /?token=…. Cross-origin
// state-changing requests are refused, and without a token only loopback
// Host names are served, which defeats DNS rebinding.
package web
