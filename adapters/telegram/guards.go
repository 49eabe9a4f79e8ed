package telegram

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
	_ chat.Streamer         = (*Adapter)(nil)
	_ chat.Singleton        = (*Adapter)(nil)
	_ chat.BoundedRunner    = (*Adapter)(nil)
	_ chat.HealthReporter   = (*Adapter)(nil)
	_ chat.Stream           = (*draftStream)(nil)
)
