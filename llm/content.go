package llm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ContentType names a content block kind.
type ContentType string

// Content block kinds, as pi writes them.
const (
	ContentText     ContentType = "text"
	ContentThinking ContentType = "thinking"
	ContentImage    ContentType = "image"
	ContentToolCall ContentType = "toolCall"
)

// Content is one block of a message: text, thinking, an image or a tool call.
// Only the fields of its Type are written.
type Content struct {
	Type ContentType

	// Text is the text of a text block.
	Text string
	// TextSignature is an optional provider signature of a text block
	// (OpenAI Responses message id).
	TextSignature string

	// Thinking is the reasoning text of a thinking block.
	Thinking string
	// ThinkingSignature is the provider's opaque signature (Anthropic) or the
	// serialized reasoning item (OpenAI Responses), needed for replay.
	ThinkingSignature string
	// Redacted marks Anthropic redacted thinking (payload in ThinkingSignature).
	Redacted bool

	// Data is base64 image data and MimeType its media type.
	Data     string
	MimeType string

	// ID, Name and Arguments describe a tool call. Arguments is a JSON
	// object; nil is written as {}.
	ID               string
	Name             string
	Arguments        json.RawMessage
	ThoughtSignature string

	// Extra holds keys pibot does not know, written back unchanged.
	Extra []Field
}

// TextBlock returns a text content block.
func TextBlock(s string) Content { return Content{Type: ContentText, Text: s} }

// ImageBlock returns an image content block.
func ImageBlock(data, mimeType string) Content {
	return Content{Type: ContentImage, Data: data, MimeType: mimeType}
}

// MarshalJSON writes the block in pi's key order.
func (c Content) MarshalJSON() ([]byte, error) {
	return c.appendJSON(make([]byte, 0, 64+len(c.Text)+len(c.Thinking)+len(c.Data)+len(c.Arguments)))
}

// appendJSON appends the block as MarshalJSON writes it.
func (c *Content) appendJSON(dst []byte) ([]byte, error) {
	w := newObjWriter(dst)
	w.val("type", string(c.Type))
	switch c.Type {
	case ContentText:
		w.val("text", c.Text)
		if c.TextSignature != "" {
			w.val("textSignature", c.TextSignature)
		}
	case ContentThinking:
		w.val("thinking", c.Thinking)
		if c.ThinkingSignature != "" {
			w.val("thinkingSignature", c.ThinkingSignature)
		}
		if c.Redacted {
			w.val("redacted", true)
		}
	case ContentImage:
		w.val("data", c.Data)
		w.val("mimeType", c.MimeType)
	case ContentToolCall:
		w.val("id", c.ID)
		w.val("name", c.Name)
		args := c.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		w.val("arguments", args)
		if c.ThoughtSignature != "" {
			w.val("thoughtSignature", c.ThoughtSignature)
		}
	}
	w.extra(c.Extra)
	return w.close()
}

// UnmarshalJSON reads a block, keeping unknown keys in Extra.
func (c *Content) UnmarshalJSON(data []byte) error {
	fields, err := decodeObject(data)
	if err != nil {
		return fmt.Errorf("content block: %w", err)
	}
	*c = Content{}
	var typ string
	for _, f := range fields {
		if f.Key == "type" {
			if err := unmarshalField(f, &typ); err != nil {
				return err
			}
		}
	}
	c.Type = ContentType(typ)
	for _, f := range fields {
		var dst any
		switch {
		case f.Key == "type":
			continue
		case c.Type == ContentText && f.Key == "text":
			dst = &c.Text
		case c.Type == ContentText && f.Key == "textSignature":
			dst = &c.TextSignature
		case c.Type == ContentThinking && f.Key == "thinking":
			dst = &c.Thinking
		case c.Type == ContentThinking && f.Key == "thinkingSignature":
			dst = &c.ThinkingSignature
		case c.Type == ContentThinking && f.Key == "redacted":
			dst = &c.Redacted
		case c.Type == ContentImage && f.Key == "data":
			dst = &c.Data
		case c.Type == ContentImage && f.Key == "mimeType":
			dst = &c.MimeType
		case c.Type == ContentToolCall && f.Key == "id":
			dst = &c.ID
		case c.Type == ContentToolCall && f.Key == "name":
			dst = &c.Name
		case c.Type == ContentToolCall && f.Key == "arguments":
			c.Arguments = append(json.RawMessage(nil), f.Value...)
			continue
		case c.Type == ContentToolCall && f.Key == "thoughtSignature":
			dst = &c.ThoughtSignature
		default:
			c.Extra = append(c.Extra, f)
			continue
		}
		if string(f.Value) == "null" {
			continue
		}
		if err := unmarshalField(f, dst); err != nil {
			return fmt.Errorf("%s block: %w", typ, err)
		}
	}
	return nil
}

// JoinText concatenates the text blocks of blocks with sep.
func JoinText(blocks []Content, sep string) string {
	n, one := 0, ""
	for _, b := range blocks {
		if b.Type == ContentText {
			n, one = n+1, b.Text
		}
	}
	if n <= 1 {
		return one // the common case, without allocating
	}
	parts := make([]string, 0, n)
	for _, b := range blocks {
		if b.Type == ContentText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, sep)
}
