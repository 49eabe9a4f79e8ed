package web

import "github.com/pibot/pibot/chat"

// The gateway finds optional abilities by type assertion; these guards make
// losing one a compile error instead of a silent downgrade.
var (
	_ chat.Adapter      = (*Adapter)(nil)
	_ chat.Responder    = (*Adapter)(nil)
	_ chat.Typer        = (*Adapter)(nil)
	_ chat.HistoryUser  = (*Adapter)(nil)
	_ chat.HealthShower = (*Adapter)(nil)
)
