package llm

import (
	"encoding/json"
	"fmt"
)

// Role is the role of a message.
type Role string

// Message roles. The first three are sent to models; the others are the
// coding agent's own roles, converted to user messages by ConvertToLLM.
const (
	RoleUser              Role = "user"
	RoleAssistant         Role = "assistant"
	RoleToolResult        Role = "toolResult"
	RoleBashExecution     Role = "bashExecution"
	RoleCustom            Role = "custom"
	RoleBranchSummary     Role = "branchSummary"
	RoleCompactionSummary Role = "compactionSummary"
)

// StopReason says why an assistant message ended.
type StopReason string

// Stop reasons, as pi names them.
const (
	StopStop    StopReason = "stop"
	StopLength  StopReason = "length"
	StopToolUse StopReason = "toolUse"
	StopError   StopReason = "error"
	StopAborted StopReason = "aborted"
)

// Cost is a usage cost in US dollars.
type Cost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// Usage counts the tokens of one model call. Input is non-cached input.
type Usage struct {
	Input       int64
	Output      int64
	CacheRead   int64
	CacheWrite  int64
	TotalTokens int64
	Cost        Cost
	// NoTotal marks usage read without totalTokens (pi v1 files); it is
	// then written without it too.
	NoTotal bool
	// Extra holds keys pibot does not know.
	Extra []Field
}

// MarshalJSON writes usage in pi's key order.
func (u Usage) MarshalJSON() ([]byte, error) { return u.appendJSON(make([]byte, 0, 192)) }

// appendJSON appends usage as MarshalJSON writes it.
func (u *Usage) appendJSON(dst []byte) ([]byte, error) {
	// Typed writes: val would box every number into an interface (an
	// allocation per non-zero cost).
	w := newObjWriter(dst)
	w.intVal("input", u.Input)
	w.intVal("output", u.Output)
	w.intVal("cacheRead", u.CacheRead)
	w.intVal("cacheWrite", u.CacheWrite)
	if !u.NoTotal || u.TotalTokens != 0 {
		w.intVal("totalTokens", u.TotalTokens)
	}
	w.key("cost")
	c := newObjWriter(w.b)
	c.floatVal("input", u.Cost.Input)
	c.floatVal("output", u.Cost.Output)
	c.floatVal("cacheRead", u.Cost.CacheRead)
	c.floatVal("cacheWrite", u.Cost.CacheWrite)
	c.floatVal("total", u.Cost.Total)
	w.b, w.err = c.close()
	w.extra(u.Extra)
	return w.close()
}

// UnmarshalJSON reads usage, keeping unknown keys.
func (u *Usage) UnmarshalJSON(data []byte) error {
	fields, err := decodeObject(data)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	*u = Usage{NoTotal: true}
	for _, f := range fields {
		var dst any
		switch f.Key {
		case "input":
			dst = &u.Input
		case "output":
			dst = &u.Output
		case "cacheRead":
			dst = &u.CacheRead
		case "cacheWrite":
			dst = &u.CacheWrite
		case "totalTokens":
			dst = &u.TotalTokens
			u.NoTotal = false
		case "cost":
			dst = &u.Cost
		default:
			u.Extra = append(u.Extra, f)
			continue
		}
		if string(f.Value) == "null" {
			continue
		}
		if err := unmarshalNumberish(f, dst); err != nil {
			return fmt.Errorf("usage: %w", err)
		}
	}
	return nil
}

// unmarshalNumberish decodes f into dst, accepting floats for integer
// fields (some servers report token counts as 12.0).
func unmarshalNumberish(f Field, dst any) error {
	if p, ok := dst.(*int64); ok {
		var n json.Number
		if err := unmarshalField(f, &n); err != nil {
			return err
		}
		if i, err := n.Int64(); err == nil {
			*p = i
			return nil
		}
		fl, err := n.Float64()
		if err != nil {
			return fmt.Errorf("field %q: %w", f.Key, err)
		}
		*p = int64(fl)
		return nil
	}
	return unmarshalField(f, dst)
}

// Tokens is TotalTokens, or the sum of the parts when it is missing (v1 files).
func (u Usage) Tokens() int64 {
	if u.TotalTokens != 0 {
		return u.TotalTokens
	}
	return u.Input + u.Output + u.CacheRead + u.CacheWrite
}

// Message is one message of a conversation in pi's shape. Which fields are
// meaningful depends on Role; MarshalJSON writes only those, in pi's key
// order, followed by any unknown keys read from a file.
type Message struct {
	Role Role

	// Content holds the blocks of user, assistant, toolResult and custom
	// messages. StringContent marks user/custom content that is a plain JSON
	// string; it is then Content's single text block.
	Content       []Content
	StringContent bool

	// Timestamp is Unix milliseconds.
	Timestamp int64

	// Assistant fields.
	API           string
	Provider      string
	Model         string
	ResponseModel string
	ResponseID    string
	Diagnostics   json.RawMessage
	Usage         Usage
	StopReason    StopReason
	ErrorMessage  string

	// Tool result fields. Details is absent when nil; JSON null is kept.
	ToolCallID string
	ToolName   string
	Details    json.RawMessage
	IsError    bool

	// bashExecution fields. ExitCode is nil when absent (cancelled).
	Command            string
	Output             string
	ExitCode           *int
	Cancelled          bool
	Truncated          bool
	FullOutputPath     string
	ExcludeFromContext *bool

	// custom fields (Details is shared with tool results).
	CustomType string
	Display    bool

	// branchSummary / compactionSummary fields.
	Summary      string
	FromID       string
	TokensBefore int64

	// Extra holds keys pibot does not know, written back unchanged.
	Extra []Field
}

// UserText returns a user message with one text block.
func UserText(text string, ts int64) Message {
	return Message{Role: RoleUser, Content: []Content{TextBlock(text)}, Timestamp: ts}
}

// Text returns the concatenated text blocks of m.
func (m Message) Text() string { return JoinText(m.Content, "") }

// ToolCalls returns m's tool call blocks.
func (m Message) ToolCalls() []Content {
	var out []Content
	for _, c := range m.Content {
		if c.Type == ContentToolCall {
			out = append(out, c)
		}
	}
	return out
}

func (m Message) content() any {
	if m.StringContent && len(m.Content) == 1 && m.Content[0].Type == ContentText {
		return m.Content[0].Text
	}
	if m.Content == nil {
		return []Content{}
	}
	return m.Content
}

// MarshalJSON writes the message in pi's key order for its role.
func (m Message) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(make([]byte, 0, m.JSONSizeHint()))
}

// JSONSizeHint is about the length of m's JSON, a little more for most
// messages (escapes may make it longer).
func (m *Message) JSONSizeHint() int {
	n := 64 + len(m.API) + len(m.Provider) + len(m.Model) + len(m.ResponseModel) + len(m.ResponseID) +
		len(m.Diagnostics) + len(m.ErrorMessage) + len(m.ToolCallID) + len(m.ToolName) + len(m.Details) +
		len(m.Command) + len(m.Output) + len(m.FullOutputPath) + len(m.CustomType) + len(m.Summary) + len(m.FromID)
	if m.Role == RoleAssistant {
		n += 300 // its keys and usage with costs
	}
	for i := range m.Content {
		c := &m.Content[i]
		n += 32 + len(c.Text) + len(c.TextSignature) + len(c.Thinking) + len(c.ThinkingSignature) + len(c.Data) +
			len(c.MimeType) + len(c.ID) + len(c.Name) + len(c.Arguments) + len(c.ThoughtSignature) + fieldsSize(c.Extra)
	}
	n += fieldsSize(m.Extra) + fieldsSize(m.Usage.Extra)
	return n + n/16
}

// fieldsSize is about the length of fs as JSON members.
func fieldsSize(fs []Field) int {
	n := 0
	for _, f := range fs {
		n += 4 + len(f.Key) + len(f.Value)
	}
	return n
}

// AppendJSON appends m as MarshalJSON writes it to dst: a caller that
// writes m into a bigger document (a session line) needs no buffer of
// its own for it. The message's own raw values (Details, Diagnostics,
// unknown keys) are written as they are, as MarshalJSON always wrote
// them (json.Marshal compacts them); its blocks are compacted.
func (m *Message) AppendJSON(dst []byte) ([]byte, error) {
	w := newObjWriter(dst)
	w.val("role", string(m.Role))
	switch m.Role {
	case RoleUser:
		w.val("content", m.content())
		w.val("timestamp", m.Timestamp)
	case RoleAssistant:
		w.val("content", m.content())
		w.val("api", m.API)
		w.val("provider", m.Provider)
		w.val("model", m.Model)
		if m.ResponseModel != "" {
			w.val("responseModel", m.ResponseModel)
		}
		w.val("usage", m.Usage)
		w.val("stopReason", string(m.StopReason))
		if m.ErrorMessage != "" {
			w.val("errorMessage", m.ErrorMessage)
		}
		if m.ResponseID != "" {
			w.val("responseId", m.ResponseID)
		}
		if m.Diagnostics != nil {
			w.val("diagnostics", m.Diagnostics)
		}
		w.val("timestamp", m.Timestamp)
	case RoleToolResult:
		w.val("toolCallId", m.ToolCallID)
		w.val("toolName", m.ToolName)
		w.val("content", m.content())
		if m.Details != nil {
			w.val("details", m.Details)
		}
		w.val("isError", m.IsError)
		w.val("timestamp", m.Timestamp)
	case RoleBashExecution:
		w.val("command", m.Command)
		w.val("output", m.Output)
		if m.ExitCode != nil {
			w.val("exitCode", *m.ExitCode)
		}
		w.val("cancelled", m.Cancelled)
		w.val("truncated", m.Truncated)
		if m.FullOutputPath != "" {
			w.val("fullOutputPath", m.FullOutputPath)
		}
		w.val("timestamp", m.Timestamp)
		if m.ExcludeFromContext != nil {
			w.val("excludeFromContext", *m.ExcludeFromContext)
		}
	case RoleCustom:
		w.val("customType", m.CustomType)
		w.val("content", m.content())
		w.val("display", m.Display)
		if m.Details != nil {
			w.val("details", m.Details)
		}
		w.val("timestamp", m.Timestamp)
	case RoleBranchSummary:
		w.val("summary", m.Summary)
		w.val("fromId", m.FromID)
		w.val("timestamp", m.Timestamp)
	case RoleCompactionSummary:
		w.val("summary", m.Summary)
		w.val("tokensBefore", m.TokensBefore)
		w.val("timestamp", m.Timestamp)
	default:
		if m.Content != nil {
			w.val("content", m.content())
		}
		w.val("timestamp", m.Timestamp)
	}
	w.extra(m.Extra)
	return w.close()
}

// UnmarshalJSON reads a message of any role; keys that do not belong to the
// role are kept in Extra.
func (m *Message) UnmarshalJSON(data []byte) error {
	fields, err := decodeObject(data)
	if err != nil {
		return fmt.Errorf("message: %w", err)
	}
	*m = Message{}
	for _, f := range fields {
		if f.Key == "role" {
			var r string
			if err := unmarshalField(f, &r); err != nil {
				return err
			}
			m.Role = Role(r)
		}
	}
	for _, f := range fields {
		if err := m.setField(f); err != nil {
			return fmt.Errorf("%s message: %w", m.Role, err)
		}
	}
	return nil
}

func (m *Message) setField(f Field) error {
	r := m.Role
	isNull := string(f.Value) == "null"
	var dst any
	switch f.Key {
	case "role":
		return nil
	case "content":
		if r == RoleBashExecution || r == RoleBranchSummary || r == RoleCompactionSummary {
			break
		}
		if len(f.Value) > 0 && f.Value[0] == '"' {
			var s string
			if err := unmarshalField(f, &s); err != nil {
				return err
			}
			m.Content = []Content{TextBlock(s)}
			m.StringContent = true
			return nil
		}
		if isNull {
			break
		}
		return unmarshalField(f, &m.Content)
	case "timestamp":
		if isNull {
			break
		}
		var n json.Number
		if err := unmarshalField(f, &n); err != nil {
			return err
		}
		if i, err := n.Int64(); err == nil {
			m.Timestamp = i
			return nil
		}
		if fl, err := n.Float64(); err == nil {
			m.Timestamp = int64(fl)
			return nil
		}
		return fmt.Errorf("field timestamp: not a number")
	}
	switch {
	case r == RoleAssistant && f.Key == "api":
		dst = &m.API
	case r == RoleAssistant && f.Key == "provider":
		dst = &m.Provider
	case r == RoleAssistant && f.Key == "model":
		dst = &m.Model
	case r == RoleAssistant && f.Key == "responseModel":
		dst = &m.ResponseModel
	case r == RoleAssistant && f.Key == "responseId":
		dst = &m.ResponseID
	case r == RoleAssistant && f.Key == "diagnostics":
		m.Diagnostics = append(json.RawMessage(nil), f.Value...)
		return nil
	case r == RoleAssistant && f.Key == "usage":
		dst = &m.Usage
	case r == RoleAssistant && f.Key == "stopReason":
		dst = &m.StopReason
	case r == RoleAssistant && f.Key == "errorMessage":
		dst = &m.ErrorMessage
	case r == RoleToolResult && f.Key == "toolCallId":
		dst = &m.ToolCallID
	case r == RoleToolResult && f.Key == "toolName":
		dst = &m.ToolName
	case (r == RoleToolResult || r == RoleCustom) && f.Key == "details":
		m.Details = append(json.RawMessage(nil), f.Value...)
		return nil
	case r == RoleToolResult && f.Key == "isError":
		dst = &m.IsError
	case r == RoleBashExecution && f.Key == "command":
		dst = &m.Command
	case r == RoleBashExecution && f.Key == "output":
		dst = &m.Output
	case r == RoleBashExecution && f.Key == "exitCode":
		if isNull {
			break
		}
		m.ExitCode = new(int)
		dst = m.ExitCode
	case r == RoleBashExecution && f.Key == "cancelled":
		dst = &m.Cancelled
	case r == RoleBashExecution && f.Key == "truncated":
		dst = &m.Truncated
	case r == RoleBashExecution && f.Key == "fullOutputPath":
		dst = &m.FullOutputPath
	case r == RoleBashExecution && f.Key == "excludeFromContext":
		m.ExcludeFromContext = new(bool)
		dst = m.ExcludeFromContext
	case r == RoleCustom && f.Key == "customType":
		dst = &m.CustomType
	case r == RoleCustom && f.Key == "display":
		dst = &m.Display
	case (r == RoleBranchSummary || r == RoleCompactionSummary) && f.Key == "summary":
		dst = &m.Summary
	case r == RoleBranchSummary && f.Key == "fromId":
		dst = &m.FromID
	case r == RoleCompactionSummary && f.Key == "tokensBefore":
		dst = &m.TokensBefore
	}
	if dst == nil {
		m.Extra = append(m.Extra, f)
		return nil
	}
	if isNull {
		// A null where pi writes a value: keep it verbatim rather than invent one.
		m.Extra = append(m.Extra, f)
		return nil
	}
	return unmarshalField(f, dst)
}
