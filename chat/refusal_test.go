package chat

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
)

// A refusal because the store is unavailable is a debug line for the
// adapters (the gateway logs the outage once); any other is a warning.
func TestRefusedLevel(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want slog.Level
	}{
		{"store unavailable", fmt.Errorf("gateway: admit: %w: %w", ErrUnavailable, errors.New("dial tcp: connection refused")), slog.LevelDebug},
		{"other", errors.New("gateway: encode inbound: bad"), slog.LevelWarn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RefusedLevel(tt.err); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
