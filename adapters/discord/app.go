package discord

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/bwmarrin/discordgo"
)

// application knows the bot's application id: configured, learnt from
// READY, or asked for with GET /applications/@me.
type application struct {
	rest *restClient

	mu sync.Mutex
	id string
}

// get returns the application id, asking Discord when it is not known
// yet.
func (a *application) get(ctx context.Context) (string, error) {
	if id := a.known(); id != "" {
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
	a.id = app.ID
	a.mu.Unlock()
	return app.ID, nil
}

// known returns the application id if known, else "".
func (a *application) known() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.id
}

// learn records id (from READY) unless one is known.
func (a *application) learn(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.id == "" {
		a.id = id
	}
}
