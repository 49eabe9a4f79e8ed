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
	calls *caller

	mu sync.Mutex
	id string
}

// get returns the application id, asking Discord when it is not known
// yet.
func (p *application) get(ctx context.Context) (string, error) {
	if id := p.known(); id != "" {
		return id, nil
	}
	var app discordgo.Application
	err := p.calls.do(ctx, modeSend, "applications/@me", "application", func(opts ...discordgo.RequestOption) error {
		body, err := p.calls.s.RequestWithBucketID("GET", discordgo.EndpointApplication("@me"), nil, discordgo.EndpointApplication(""), opts...)
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
	p.mu.Lock()
	p.id = app.ID
	p.mu.Unlock()
	return app.ID, nil
}

// known returns the application id if known, else "".
func (p *application) known() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// learn records id (from READY) unless one is known.
func (p *application) learn(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.id == "" {
		p.id = id
	}
}
