package chattest

import "github.com/pibot/pibot/chat"

// The fake offers every optional ability the gateway looks for by type
// assertion, so the gateway's tests exercise each of them; a lost method
// must be a compile error, not a silently skipped code path. Two abilities
// change how the gateway behaves and are views: Streaming (chat.Streamer)
// and Threads (chat.ThreadOpener).
var (
	_ chat.Adapter          = (*Adapter)(nil)
	_ chat.Deleter          = (*Adapter)(nil)
	_ chat.Typer            = (*Adapter)(nil)
	_ chat.Reactor          = (*Adapter)(nil)
	_ chat.Uploader         = (*Adapter)(nil)
	_ chat.Downloader       = (*Adapter)(nil)
	_ chat.CommandRegistrar = (*Adapter)(nil)
	_ chat.Responder        = (*Adapter)(nil)
	_ chat.Streamer         = StreamAdapter{}
	_ chat.ThreadOpener     = ThreadAdapter{}
)
