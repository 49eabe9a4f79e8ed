package discordtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Interaction callback types.
const (
	CallbackMessage        = 4
	CallbackDeferred       = 5
	CallbackDeferredUpdate = 6
	CallbackUpdate         = 7
)

// flagEphemeral is the message flag of an ephemeral message.
const flagEphemeral = 64

// ackWindow is how long Discord waits for the first answer to an
// interaction.
const ackWindow = 3 * time.Second

// Option is one option of an application command interaction.
type Option struct {
	Name    string   `json:"name"`
	Type    int      `json:"type"`
	Value   any      `json:"value,omitempty"`
	Options []Option `json:"options,omitempty"`
}

// Command dispatches an application command interaction (/name sub opts)
// by u in channel over the gateway and returns its id.
func (s *Server) Command(channel string, u User, name string, opts ...Option) string {
	data := map[string]any{"id": "cmd1", "name": name, "type": 1, "options": opts}
	return s.interact(channel, u, 2, data, "")
}

// Press dispatches a button press (a component interaction) on message
// msg by u and returns the interaction id.
func (s *Server) Press(msg string, u User, customID string) string {
	s.mu.Lock()
	m := s.byID[msg]
	s.mu.Unlock()
	channel := ""
	if m != nil {
		channel = m.ChannelID
	}
	return s.interact(channel, u, 3, map[string]any{"custom_id": customID, "component_type": 2}, msg)
}

func (s *Server) interact(channel string, u User, typ int, data map[string]any, msg string) string {
	s.mu.Lock()
	id := s.newIDLocked()
	token := "itok-" + id
	s.interactions[token] = &interaction{id: id, token: token, channel: channel, user: u.ID, msg: msg, created: time.Now()}
	c := s.channels[channel]
	ev := map[string]any{"id": id, "application_id": s.Bot.ID, "type": typ, "data": data, "channel_id": channel,
		"token": token, "version": 1}
	if c != nil && c.GuildID != "" {
		ev["guild_id"] = c.GuildID
		ev["member"] = map[string]any{"user": u}
	} else {
		ev["user"] = u
	}
	if m := s.byID[msg]; m != nil {
		ev["message"] = m
	}
	s.mu.Unlock()
	s.Dispatch("INTERACTION_CREATE", ev)
	return id
}

// Expire makes an interaction's token unusable, as after 15 minutes.
func (s *Server) Expire(interactionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ix := range s.interactions {
		if ix.id == interactionID {
			ix.expired = true
		}
	}
}

func (s *Server) interactionByID(id, token string) *interaction {
	ix := s.interactions[token]
	if ix == nil || ix.id != id {
		return nil
	}
	return ix
}

type callbackBody struct {
	Type int             `json:"type"`
	Data json.RawMessage `json:"data"`
}

func (s *Server) callbackLocked(w http.ResponseWriter, id, token string, body json.RawMessage) int {
	ix := s.interactionByID(id, token)
	if ix == nil || ix.expired || time.Since(ix.created) > ackWindow {
		apiError(w, http.StatusNotFound, 10062, "Unknown interaction")
		return http.StatusNotFound
	}
	if ix.acked {
		apiError(w, http.StatusBadRequest, 40060, "Interaction has already been acknowledged.")
		return http.StatusBadRequest
	}
	var cb callbackBody
	if err := json.Unmarshal(body, &cb); err != nil {
		apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return http.StatusBadRequest
	}
	var in outMsg
	if len(cb.Data) > 0 {
		_ = json.Unmarshal(cb.Data, &in)
	}
	ephemeral := ""
	if in.Flags&flagEphemeral != 0 {
		ephemeral = ix.user
	}
	s.callbacks = append(s.callbacks, Callback{InteractionID: id, Type: cb.Type, Data: cb.Data, Time: time.Now()})
	switch cb.Type {
	case CallbackMessage, CallbackDeferred:
		m := &Message{ID: s.newIDLocked(), ChannelID: ix.channel, Author: s.Bot, Flags: in.Flags, Ephemeral: ephemeral,
			Timestamp: time.Now().UTC().Format(time.RFC3339)}
		if c := s.channels[ix.channel]; c != nil {
			m.GuildID = c.GuildID
		}
		if cb.Type == CallbackMessage {
			if in.Content == nil || !checkContent(w, *in.Content, 0) {
				if in.Content == nil {
					apiError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
				}
				return http.StatusBadRequest
			}
			m.Content = *in.Content
			if in.Components != nil {
				m.Components = *in.Components
			}
		}
		s.storeLocked(m)
		ix.original = m.ID
	case CallbackDeferredUpdate:
		ix.original = ix.msg
	case CallbackUpdate:
		ix.original = ix.msg
		m := s.byID[ix.msg]
		if m == nil {
			apiError(w, http.StatusNotFound, 10008, "Unknown Message")
			return http.StatusNotFound
		}
		if in.Content != nil {
			m.Content = *in.Content
		}
		if in.Components != nil {
			m.Components = *in.Components
		}
		m.Edits = append(m.Edits, time.Now())
	default:
		apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body: type")
		return http.StatusBadRequest
	}
	ix.acked = true
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// webhookLocked serves follow-ups and edits through an interaction token.
func (s *Server) webhookLocked(w http.ResponseWriter, method string, rt route, body json.RawMessage, files map[string][]byte) int {
	ix := s.interactions[rt.major]
	if rt.parts[1] != s.Bot.ID || ix == nil || ix.expired {
		apiError(w, http.StatusNotFound, 10015, "Unknown Webhook")
		return http.StatusNotFound
	}
	if !ix.acked {
		apiError(w, http.StatusNotFound, 10015, "Unknown Webhook")
		return http.StatusNotFound
	}
	if method == http.MethodPost && len(rt.parts) == 3 {
		var in outMsg
		_ = json.Unmarshal(body, &in)
		ephemeral := ""
		if in.Flags&flagEphemeral != 0 {
			ephemeral = ix.user
		}
		return s.createLocked(w, ix.channel, body, files, s.Bot, ephemeral)
	}
	if len(rt.parts) != 5 || rt.parts[3] != "messages" {
		apiError(w, http.StatusNotFound, 0, "404: Not Found")
		return http.StatusNotFound
	}
	id := rt.parts[4]
	if id == "@original" {
		id = ix.original
	}
	m := s.byID[id]
	if m == nil {
		apiError(w, http.StatusNotFound, 10008, "Unknown Message")
		return http.StatusNotFound
	}
	if method == http.MethodDelete {
		return s.deleteLocked(w, m.ChannelID, id)
	}
	return s.editLocked(w, m.ChannelID, id, body)
}

// Visible returns the texts user sees in channel, oldest first: every
// message but the ephemeral ones of other users.
func (s *Server) Visible(channel, user string) []string {
	var out []string
	for _, m := range s.Messages(channel) {
		if m.Ephemeral == "" || m.Ephemeral == user {
			out = append(out, m.Content)
		}
	}
	return out
}

// Transcript is Visible joined by newlines.
func (s *Server) Transcript(channel, user string) string {
	return strings.Join(s.Visible(channel, user), "\n")
}
