package chat

import (
	"errors"
	"log/slog"
)

// ErrUnavailable is wrapped by a Sink's error when pibot cannot take
// events for now because the store it keeps them in does not answer (in
// cluster mode the Redis the replicas share, else a full or failing
// disk). It is a passing state, not a fault of the event: the same event
// is taken once the store answers again. Adapters that tell their users
// about a refused event (Redelivery ShowsRefusal) say so in words of
// their own, never with the error's text.
var ErrUnavailable = errors.New("storage unavailable")

// Redelivery says what becomes of an event the Sink refused (returned an
// error for), so that what pibot tells the sender is true for the
// platform.
type Redelivery int

const (
	// NoRedelivery: the platform does not deliver a refused event again
	// (Discord's gateway, the terminal); the sender has to send it again.
	NoRedelivery Redelivery = iota
	// Redelivers: the platform delivers a refused event again for a
	// while (Telegram until the update is confirmed; Slack's Events API
	// a few more times within minutes), so it is taken once the store
	// answers if that is soon enough.
	Redelivers
	// ShowsRefusal: the adapter itself shows the sender that the event
	// was not taken and offers to send it again (the web chat's Retry,
	// which resends it under the same id); the gateway sends no notice.
	ShowsRefusal
)

// HealthShower is an adapter that shows its users whether pibot can take
// messages now (the web chat's header). The gateway calls ShowHealth on
// every change: problem is "" when all is well, else a few words for
// users, such as "storage unavailable, retrying" (never an error's text).
// It must not block.
type HealthShower interface {
	ShowHealth(problem string)
}

// RefusedLevel is the level at which an adapter logs an event the Sink
// refused with err: debug when pibot's store is unavailable
// (ErrUnavailable), whose outage the gateway logs once, not once per
// event; a warning otherwise.
func RefusedLevel(err error) slog.Level {
	if errors.Is(err, ErrUnavailable) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
