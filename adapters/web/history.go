package web

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// maxListed is how many past conversations /api/conversations lists.
const maxListed = 50

// historyAPI serves a conversation rebuilt from its session
// (/api/history) and the list of past conversations (/api/conversations)
// from the chat.History the gateway hands the adapter.
type historyAPI struct {
	log *slog.Logger

	mu   sync.Mutex
	hist chat.History // nil until use
}

// use sets the history to serve (see Adapter.UseHistory).
func (h *historyAPI) use(hist chat.History) {
	h.mu.Lock()
	h.hist = hist
	h.mu.Unlock()
}

func (h *historyAPI) get() chat.History {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hist
}

// historyReply is the body of GET /api/history.
type historyReply struct {
	Messages []*message   `json:"messages"`
	Threads  []wireThread `json:"threads"`
	// Elsewhere names messages the session has that the place they were
	// posted in no longer shows (a /tree jump left them): the page
	// removes them there.
	Elsewhere []string `json:"elsewhere"`
}

// wireThread is a thread of a rebuilt conversation.
type wireThread struct {
	ID string `json:"id"`
	// Root is the message the thread hangs off; nil if unknown.
	Root  *wireRef `json:"root,omitempty"`
	Title string   `json:"title"`
}

// convSummary is one entry of GET /api/conversations.
type convSummary struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Updated  time.Time `json:"updated"`
	Messages int       `json:"messages"`
	// Agent is the conversation's agent, where sessions record one.
	Agent string `json:"agent,omitempty"`
}

// handleHistory answers GET /api/history?conv=ID with the conversation
// rebuilt from its session: the main line and each thread as far as their
// heads, so what it shows is what the model sees. A message is named by
// its place (thread) and id: after a /tree jump the same message may be
// shown in two places. Messages the session has no platform id for get an
// "h-" id: they cannot be replied to.
func (h *historyAPI) handleHistory(w http.ResponseWriter, r *http.Request) {
	convID := r.URL.Query().Get("conv")
	if !validID(convID) {
		http.Error(w, "bad conversation id", http.StatusBadRequest)
		return
	}
	out := historyReply{Messages: []*message{}, Threads: []wireThread{}, Elsewhere: []string{}}
	hist := h.get()
	if hist == nil {
		writeJSON(w, out)
		return
	}
	tr, err := hist.Transcript(r.Context(), chat.ConvRef{Platform: Platform, Channel: convID, DM: true})
	if err != nil {
		h.log.Warn("web chat: history", "conv", convID, "err", err)
		http.Error(w, "web chat: the history could not be read (the details are in pibot's log)", http.StatusInternalServerError)
		return
	}
	for i, m := range tr.Messages {
		msg := &message{Type: "msg", ID: m.ID, Thread: m.Thread, From: fromUser, Text: m.Text, Time: m.Time}
		if m.FromBot {
			msg.From = fromBot
		}
		if !validID(msg.ID) || m.Moved && m.Origin != "" && !validID(m.Origin) {
			msg.ID = "h-" + strconv.Itoa(i)
		} else if m.Moved {
			msg.Origin = &m.Origin
		}
		msg.Note = m.Note
		out.Messages = append(out.Messages, msg)
	}
	for _, th := range tr.Threads {
		if !validID(th.ID) {
			continue
		}
		wt := wireThread{ID: th.ID, Title: th.Title}
		if th.Root != "" {
			wt.Root = &wireRef{ID: th.Root, Thread: th.RootThread}
		}
		out.Threads = append(out.Threads, wt)
	}
	for _, id := range tr.Elsewhere {
		if validID(id) {
			out.Elsewhere = append(out.Elsewhere, id)
		}
	}
	writeJSON(w, out)
}

// handleConversations answers GET /api/conversations with the web user's
// past conversations, most recent first.
func (h *historyAPI) handleConversations(w http.ResponseWriter, r *http.Request) {
	out := []convSummary{}
	if hist := h.get(); hist != nil {
		list, err := hist.Conversations(r.Context(), maxListed)
		if err != nil {
			h.log.Warn("web chat: conversations", "err", err)
			http.Error(w, "web chat: the conversations could not be listed (the details are in pibot's log)", http.StatusInternalServerError)
			return
		}
		for _, c := range list {
			if c.Conv.Platform != Platform || c.Conv.Workspace != "" || !validID(c.Conv.Channel) {
				continue
			}
			out = append(out, convSummary{ID: c.Conv.Channel, Title: c.Title, Updated: c.Updated, Messages: c.Messages, Agent: c.Agent})
		}
	}
	writeJSON(w, map[string]any{"conversations": out})
}
