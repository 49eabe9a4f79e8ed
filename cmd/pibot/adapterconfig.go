package main

import (
	"github.com/pibot/pibot/adapters/discord"
	"github.com/pibot/pibot/adapters/slack"
	"github.com/pibot/pibot/adapters/telegram"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/secret"
)

// The chat platforms' settings as their adapters take them, with every
// secret read (inline, or from its *_file: systemd credentials, Docker
// secrets). serve builds the adapters from these and `pibot doctor`
// checks the same tokens at the roots the adapters resolve from the same
// api_url (telegram.APIRoot, slack.APIRoot, discord.APIRoot): what doctor
// approves is what serve uses.

// readSecret is config.ReadSecret as a secret.Secret.
func readSecret(key, value, file string) (secret.Secret, error) {
	v, err := config.ReadSecret(key, value, file)
	return secret.New(v), err
}

// telegramConfig is adapters.telegram with its token and webhook secret read.
func telegramConfig(cfg config.Config) (telegram.Config, error) {
	tg := cfg.Adapter.Telegram
	tok, err := readSecret("adapters.telegram.token", tg.Token, tg.TokenFile)
	if err != nil {
		return telegram.Config{}, err
	}
	whSecret, err := readSecret("adapters.telegram.webhook_secret", tg.WebhookSecret, tg.WebhookSecretFile)
	if err != nil {
		return telegram.Config{}, err
	}
	return telegram.Config{Token: tok, APIURL: tg.APIURL, Mode: tg.Mode, WebhookURL: tg.WebhookURL,
		WebhookSecret: whSecret, AllowedUpdates: tg.AllowedUpdates}, nil
}

// slackConfig is adapters.slack with its tokens and signing secret read.
func slackConfig(cfg config.Config) (slack.Config, error) {
	s := cfg.Adapter.Slack
	bot, err := readSecret("adapters.slack.bot_token", s.BotToken, s.BotTokenFile)
	if err != nil {
		return slack.Config{}, err
	}
	app, err := readSecret("adapters.slack.app_token", s.AppToken, s.AppTokenFile)
	if err != nil {
		return slack.Config{}, err
	}
	sign, err := readSecret("adapters.slack.signing_secret", s.SigningSecret, s.SigningSecretFile)
	if err != nil {
		return slack.Config{}, err
	}
	return slack.Config{BotToken: bot, AppToken: app, SigningSecret: sign, Mode: s.Mode, APIURL: s.APIURL, Command: s.Command}, nil
}

// discordConfig is adapters.discord with its token read.
func discordConfig(cfg config.Config) (discord.Config, error) {
	d := cfg.Adapter.Discord
	tok, err := readSecret("adapters.discord.token", d.Token, d.TokenFile)
	if err != nil {
		return discord.Config{}, err
	}
	if tok.IsZero() {
		return discord.Config{}, &config.Error{Key: "adapters.discord.token", Msg: "is empty (the bot token from the developer portal)"}
	}
	return discord.Config{Token: tok, APIURL: d.APIURL, ApplicationID: d.ApplicationID, Guilds: d.Guilds, Command: d.Command,
		StatePath: dataPath(cfg, "discord-gateway.json")}, nil
}
