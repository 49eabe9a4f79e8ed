package discord

import (
	"context"
	"net/url"
	"strconv"
)

// Permissions pibot's bot needs in a guild.
const (
	permAddReactions        = 1 << 6
	permViewChannel         = 1 << 10
	permSendMessages        = 1 << 11
	permAttachFiles         = 1 << 15
	permReadMessageHistory  = 1 << 16
	permCreatePublicThreads = 1 << 35
	permSendInThreads       = 1 << 38

	// InvitePermissions is the permission integer of the invite URL.
	InvitePermissions = permAddReactions | permViewChannel | permSendMessages | permAttachFiles |
		permReadMessageHistory | permCreatePublicThreads | permSendInThreads
)

// InviteURL is the OAuth2 URL that adds the application's bot to a guild
// with the scopes bot and applications.commands and exactly the
// permissions pibot needs.
func InviteURL(applicationID string) string {
	q := url.Values{}
	q.Set("client_id", applicationID)
	q.Set("scope", "bot applications.commands")
	q.Set("permissions", strconv.FormatInt(InvitePermissions, 10))
	return "https://discord.com/oauth2/authorize?" + q.Encode()
}

// ApplicationID returns the application id: configured, learned from
// READY, or asked from Discord (GET /applications/@me).
func (a *Adapter) ApplicationID(ctx context.Context) (string, error) {
	return a.app.get(ctx)
}
