package main

import (
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/internal/extensions"
	"github.com/pibot/pibot/providers"
)

// The gateway finds an adapter's optional abilities by type assertion:
// endOnEOF must keep the terminal adapter's visible (embedding chat.Adapter
// instead of *term.Adapter would hide them without a compile error).
var (
	_ chat.Typer     = (*endOnEOF)(nil)
	_ chat.Responder = (*endOnEOF)(nil)
	_ chat.Streamer  = (*endOnEOF)(nil)
)

// The extensions are what the gateway plugs into runs.
var _ gateway.Extensions = (*extensions.Set)(nil)

// The registry is what fallbackModels resolves through.
var _ gateway.Models = (*providers.Registry)(nil)
