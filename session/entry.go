package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/pibot/pibot/llm"
)

// Entry types, as pi names them.
const (
	TypeSession             = "session"
	TypeMessage             = "message"
	TypeThinkingLevelChange = "thinking_level_change"
	TypeModelChange         = "model_change"
	TypeCompaction          = "compaction"
	TypeBranchSummary       = "branch_summary"
	TypeCustom              = "custom"
	TypeCustomMessage       = "custom_message"
	TypeLabel               = "label"
	TypeSessionInfo         = "session_info"
)

// pibot-only custom entry types.
const (
	CustomHead   = "pibot.head"
	CustomRepair = "pibot.repair"
)

// CurrentVersion is the session format version pibot writes.
const CurrentVersion = 3

// Header is the first line of a session file. Extra holds keys pibot does
// not know (legacy provider/modelId/thinkingLevel/branchedFrom), kept in order.
type Header struct {
	Type          string
	Version       int
	ID            string
	Timestamp     string
	Cwd           string
	ParentSession string
	Extra         []llm.Field
}

// Meta is the top-level "pibot" object of entries written from chat.
type Meta struct {
	Loc  string `json:"loc,omitempty"`
	Msg  string `json:"msg,omitempty"`
	From string `json:"from,omitempty"`
}

// Entry is one tree node of a session. Which fields are meaningful depends on
// Type (see pi's format). Entries returned by Session methods have Message
// decoded and Raw set to the line exactly as stored, so unknown fields are
// never lost: Fork and Clone copy Raw.
type Entry struct {
	Type      string
	ID        string
	ParentID  string // "" = root (JSON null)
	Timestamp string // ISO-8601 with milliseconds, UTC

	// message
	Message *llm.Message
	// thinking_level_change
	ThinkingLevel string
	// model_change
	Provider, ModelID string
	// compaction (Summary, FirstKeptEntryID, TokensBefore, Details, FromHook)
	// and branch_summary (FromID, Summary, Details, FromHook).
	Summary          string
	FirstKeptEntryID string
	TokensBefore     int64
	Details          json.RawMessage // nil = absent
	FromHook         *bool
	FromID           string
	// custom (CustomType, Data) and custom_message (CustomType, Content,
	// Display, Details).
	CustomType string
	Data       json.RawMessage // nil = absent
	Content    json.RawMessage // string or content block array
	Display    bool
	// label: Label nil clears the target's label.
	TargetID string
	Label    *string
	// session_info: Name nil or "" clears the session name.
	Name *string

	// Pibot is the chat metadata; Fence the cluster fence (0 = none).
	Pibot *Meta
	Fence int64

	// Raw is the stored line (no newline); empty for entries not yet written.
	Raw json.RawMessage
}

// entryEnvelopeRoom is room enough for the keys and punctuation of an
// entry's fields other than its message and raw parts (type, ids,
// timestamp, pibot, fence, and the newline), and a few short values.
const entryEnvelopeRoom = 160

// objWriter appends a JSON object to b, keys in the order written.
type objWriter struct{ b []byte }

func (w *objWriter) key(k string) {
	if len(w.b) == 0 {
		w.b = append(w.b, '{')
	} else {
		w.b = append(w.b, ',')
	}
	w.b = llm.AppendJSONString(w.b, k)
	w.b = append(w.b, ':')
}

func (w *objWriter) raw(k string, v []byte) {
	w.key(k)
	w.b = append(w.b, v...)
}

func (w *objWriter) val(k string, v any) error {
	switch x := v.(type) {
	case bool:
		w.key(k)
		w.b = strconv.AppendBool(w.b, x)
		return nil
	case int64:
		w.key(k)
		w.b = strconv.AppendInt(w.b, x, 10)
		return nil
	case int:
		w.key(k)
		w.b = strconv.AppendInt(w.b, int64(x), 10)
		return nil
	case *Meta:
		if x != nil {
			w.key(k)
			w.meta(x)
			return nil
		}
	}
	b, err := marshalNoEscape(v)
	if err != nil {
		return fmt.Errorf("field %s: %w", k, err)
	}
	w.raw(k, b)
	return nil
}

// meta writes m as encoding/json does (its fields omitted when empty).
func (w *objWriter) meta(m *Meta) {
	w.b = append(w.b, '{')
	sep := false
	for _, f := range [...]struct{ k, v string }{{"loc", m.Loc}, {"msg", m.Msg}, {"from", m.From}} {
		if f.v == "" {
			continue
		}
		if sep {
			w.b = append(w.b, ',')
		}
		sep = true
		w.b = llm.AppendJSONString(w.b, f.k)
		w.b = append(w.b, ':')
		w.b = llm.AppendJSONString(w.b, f.v)
	}
	w.b = append(w.b, '}')
}

func (w *objWriter) str(k, v string) {
	w.key(k)
	w.b = llm.AppendJSONString(w.b, v)
}

func (w *objWriter) parent(id string) {
	if id == "" {
		w.raw("parentId", []byte("null"))
		return
	}
	w.str("parentId", id)
}

func (w *objWriter) close() []byte {
	if len(w.b) == 0 {
		return []byte("{}")
	}
	return append(w.b, '}')
}

// marshalNoEscape encodes like JSON.stringify: no HTML escaping.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// MarshalJSON writes the header in pi's key order.
func (h Header) MarshalJSON() ([]byte, error) {
	var w objWriter
	w.str("type", TypeSession)
	if h.Version != 0 {
		_ = w.val("version", h.Version)
	}
	w.str("id", h.ID)
	w.str("timestamp", h.Timestamp)
	w.str("cwd", h.Cwd)
	if h.ParentSession != "" {
		w.str("parentSession", h.ParentSession)
	}
	for _, f := range h.Extra {
		w.raw(f.Key, f.Value)
	}
	return w.close(), nil
}

// MarshalJSON writes the entry in pi's key order for its type, with the
// pibot and fence fields last, or, for a message, in front of the message. Raw values (the message's arguments and
// details, custom data) are written as given: encoding/json, which calls
// MarshalJSON, checks and compacts the whole entry into one line.
func (e Entry) MarshalJSON() ([]byte, error) {
	// The line's buffer is made once, big enough for the message too,
	// which is appended in place: it does not grow (and copy) on its way
	// to a message's size.
	size := entryEnvelopeRoom + len(e.Type) + len(e.ID) + len(e.ParentID) + len(e.Timestamp) + len(e.CustomType) +
		len(e.Data) + len(e.Content) + len(e.Details) + len(e.Summary)
	if e.Pibot != nil {
		size += len(e.Pibot.Loc) + len(e.Pibot.Msg) + len(e.Pibot.From)
	}
	if e.Type == TypeMessage && e.Message != nil {
		size += e.Message.JSONSizeHint()
	}
	w := objWriter{b: make([]byte, 0, size)}
	base := func() {
		w.str("id", e.ID)
		w.parent(e.ParentID)
		w.str("timestamp", e.Timestamp)
	}
	w.str("type", e.Type)
	switch e.Type {
	case TypeCustom:
		w.str("customType", e.CustomType)
		if e.Data != nil {
			w.raw("data", e.Data)
		}
		base()
	case TypeCustomMessage:
		w.str("customType", e.CustomType)
		content := e.Content
		if content == nil {
			content = json.RawMessage(`""`)
		}
		w.raw("content", content)
		_ = w.val("display", e.Display)
		if e.Details != nil {
			w.raw("details", e.Details)
		}
		base()
	default:
		base()
	}
	if e.Type == TypeMessage {
		// In front of the message, which pi writes last: a reader can
		// take the envelope from the line's prefix (WriteContext).
		if err := e.pibotFence(&w); err != nil {
			return nil, err
		}
	}
	switch e.Type {
	case TypeMessage:
		if e.Message == nil {
			return nil, fmt.Errorf("session: message entry %s without message", e.ID)
		}
		// Whoever encodes the entry (prepare, json.Marshal) checks and
		// compacts the whole line once.
		w.key("message")
		b, err := e.Message.AppendJSON(w.b)
		if err != nil {
			return nil, fmt.Errorf("field message: %w", err)
		}
		w.b = b
	case TypeThinkingLevelChange:
		w.str("thinkingLevel", e.ThinkingLevel)
	case TypeModelChange:
		w.str("provider", e.Provider)
		w.str("modelId", e.ModelID)
	case TypeCompaction:
		w.str("summary", e.Summary)
		w.str("firstKeptEntryId", e.FirstKeptEntryID)
		_ = w.val("tokensBefore", e.TokensBefore)
		e.summaryTail(&w)
	case TypeBranchSummary:
		from := e.FromID
		if from == "" {
			from = "root"
		}
		w.str("fromId", from)
		w.str("summary", e.Summary)
		e.summaryTail(&w)
	case TypeLabel:
		w.str("targetId", e.TargetID)
		if e.Label != nil {
			w.str("label", *e.Label)
		}
	case TypeSessionInfo:
		if e.Name != nil {
			w.str("name", *e.Name)
		}
	}
	if e.Type != TypeMessage {
		if err := e.pibotFence(&w); err != nil {
			return nil, err
		}
	}
	return w.close(), nil
}

// pibotFence writes the pibot and fence fields.
func (e Entry) pibotFence(w *objWriter) error {
	if e.Pibot != nil {
		if err := w.val("pibot", e.Pibot); err != nil {
			return err
		}
	}
	if e.Fence != 0 {
		_ = w.val("fence", e.Fence)
	}
	return nil
}

func (e Entry) summaryTail(w *objWriter) {
	if e.Details != nil {
		w.raw("details", e.Details)
	}
	if e.FromHook != nil {
		_ = w.val("fromHook", *e.FromHook)
	}
}

// entryJSON is the decoding shape of every entry field except the message.
type entryJSON struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	ParentID         *string         `json:"parentId"`
	Timestamp        string          `json:"timestamp"`
	ThinkingLevel    string          `json:"thinkingLevel"`
	Provider         string          `json:"provider"`
	ModelID          string          `json:"modelId"`
	Summary          string          `json:"summary"`
	FirstKeptEntryID string          `json:"firstKeptEntryId"`
	TokensBefore     json.Number     `json:"tokensBefore"`
	Details          json.RawMessage `json:"details"`
	FromHook         *bool           `json:"fromHook"`
	FromID           string          `json:"fromId"`
	CustomType       string          `json:"customType"`
	Data             json.RawMessage `json:"data"`
	Content          json.RawMessage `json:"content"`
	Display          bool            `json:"display"`
	TargetID         string          `json:"targetId"`
	Label            *string         `json:"label"`
	Name             *string         `json:"name"`
	Message          json.RawMessage `json:"message"`
}

// decodeEntry decodes a stored line completely. Fields of unexpected JSON
// types are left at their zero values rather than failing the entry.
func decodeEntry(raw []byte) (Entry, error) {
	var j entryJSON
	members := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &members); err != nil {
		return Entry{}, err
	}
	if json.Unmarshal(raw, &j) != nil {
		j = entryJSON{}
		for k, v := range members {
			one, _ := json.Marshal(map[string]json.RawMessage{k: v})
			_ = json.Unmarshal(one, &j) // type mismatches leave the zero value
		}
	}
	e := Entry{
		Type: j.Type, ID: j.ID, Timestamp: j.Timestamp,
		ThinkingLevel: j.ThinkingLevel, Provider: j.Provider, ModelID: j.ModelID,
		Summary: j.Summary, FirstKeptEntryID: j.FirstKeptEntryID, Details: j.Details,
		FromHook: j.FromHook, FromID: j.FromID, CustomType: j.CustomType, Data: j.Data,
		Content: j.Content, Display: j.Display, TargetID: j.TargetID, Label: j.Label,
		Name: j.Name, Raw: raw,
	}
	if j.ParentID != nil {
		e.ParentID = *j.ParentID
	}
	if n, ok := rawInt([]byte(j.TokensBefore)); ok {
		e.TokensBefore = n
	}
	if j.Type == TypeMessage && len(j.Message) > 0 && j.Message[0] == '{' {
		var m llm.Message
		if err := json.Unmarshal(j.Message, &m); err != nil {
			return Entry{}, fmt.Errorf("message: %w", err)
		}
		e.Message = &m
	}
	if p, ok := members["pibot"]; ok {
		var m Meta
		if json.Unmarshal(p, &m) == nil {
			e.Pibot = &m
		}
	}
	if f, ok := members["fence"]; ok {
		e.Fence, _ = rawInt(f)
	}
	return e, nil
}
