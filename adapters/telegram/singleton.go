package telegram

import (
	"strconv"

	"github.com/pibot/pibot/chat"
)

var _ chat.Singleton = (*Adapter)(nil)

// SingletonKey names the lease a polling adapter runs under: Telegram
// lets one getUpdates caller per bot at a time, so in cluster mode only
// one replica may poll. In webhook mode any replica may take a delivery
// and no lease is needed (""). The key holds the bot's numeric id (the
// public part of the token), never the token.
func (a *Adapter) SingletonKey() string {
	if a.cfg.Mode == ModeWebhook {
		return ""
	}
	return "telegram/poll/" + strconv.FormatInt(a.bot.ID(), 10)
}
