package discord

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/bwmarrin/discordgo"
)

// application returns the application id: configured, from READY, or
// GET /applications/@me.
func (a *Adapter) application(ctx context.Context) (string, error) {
	if id := a.applicationID(); id != "" {
		return id, nil
	}
	var app discordgo.Application
	err := a.rest.do(ctx, modeSend, "applications/@me", "application", func(opts ...discordgo.RequestOption) error {
		body, err := a.rest.s.RequestWithBucketID("GET", discordgo.EndpointApplication("@me"), nil, discordgo.EndpointApplication(""), opts...)
		if err != nil {
			return err
		}
		return json.Unmarshal(body, &app)
	})
	if err != nil {
		return "", err
	}
	if !isID(app.ID) {
		return "", errors.New("discord: GET /applications/@me gave no id")
	}
	a.mu.Lock()
	a.appID = app.ID
	a.mu.Unlock()
	return app.ID, nil
}
