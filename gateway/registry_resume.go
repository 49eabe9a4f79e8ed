package gateway

import (
	"context"
	"fmt"

	"github.com/pibot/pibot/chat"
)

// SessionOf returns the session file conv is bound to, if it has one: the
// conversation a restarted terminal or web chat resumes.
func (g *Gateway) SessionOf(ctx context.Context, conv chat.ConvRef) (path string, ok bool, err error) {
	path, ok, err = g.index.Get(ctx, conv.Key())
	if err != nil {
		return "", false, fmt.Errorf("gateway: session of %s: %w", conv.Key(), err)
	}
	return path, ok, nil
}
