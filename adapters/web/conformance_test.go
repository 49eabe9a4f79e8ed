package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/adaptertest"
)

// The web chat passes the chat conformance suite; presses arrive through
// its HTTP API (httptest), as a browser sends them.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
		a := newAdapter(t, Config{})
		srv := serve(t, a)
		presses, sent := 0, 0
		return adaptertest.Target{
			Adapter:    a,
			Conv:       conv("c1", ""),
			User:       UserID,
			Transcript: a.transcript,
			InPlace:    true,
			Press: func(ctx context.Context, ref chat.MsgRef, _ int, id string) error {
				presses++
				body, _ := json.Marshal(map[string]string{"conv": ref.Conv.Channel, "msg": ref.ID, "data": id, "id": fmt.Sprintf("p%d", presses)})
				if code, resp := post(t, srv, "/api/action", string(body)); code != 200 {
					return fmt.Errorf("POST /api/action: %d %s", code, resp)
				}
				return nil
			},
			// The browser posts a message, in a thread it named or not;
			// a refused one is shown with Retry, which sends it again
			// under the same id. There are no groups, so no mentions.
			Deliver: func(ctx context.Context, ev adaptertest.Event) (adaptertest.Delivered, error) {
				sent++
				req := map[string]string{"conv": "c1", "id": fmt.Sprintf("m%d", sent), "text": ev.Text}
				switch ev.Kind {
				case adaptertest.EventDM:
				case adaptertest.EventCommand:
					req["text"] = "/" + ev.Text
				case adaptertest.EventThreadReply:
					req["thread"] = "t1"
				default:
					return adaptertest.Delivered{}, errors.ErrUnsupported
				}
				body, _ := json.Marshal(req)
				send := func(context.Context) error {
					if code, resp := post(t, srv, "/api/send", string(body)); code != 200 {
						return fmt.Errorf("POST /api/send: %d %s", code, resp)
					}
					return nil
				}
				first := send(ctx)
				if first != nil && !strings.Contains(first.Error(), ": 503 ") {
					return adaptertest.Delivered{}, first
				}
				return adaptertest.Delivered{Conv: conv("c1", req["thread"]), Again: send}, nil
			},
		}
	})
}

// transcript is the bot's messages of conv that browsers are shown, oldest
// first.
func (a *Adapter) transcript(c chat.ConvRef) string {
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	l := a.store.convs[c.Channel]
	if l == nil {
		return ""
	}
	var texts []string
	for _, e := range l.entries {
		if !strings.HasPrefix(e.key, "c:") {
			continue
		}
		if m := l.msgs[e.msgID]; m != nil && m.From == fromBot && m.Thread == c.Thread {
			texts = append(texts, m.Text)
		}
	}
	return strings.Join(texts, "\n")
}
