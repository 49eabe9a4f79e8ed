package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/transform"
)

// Responses is a model served through the /responses API. Reasoning items
// are kept (as JSON in the thinking block's signature) so that they can be
// replayed; tool call ids are "<call_id>|<item_id>".
type Responses struct {
	base
	compat resolved
	svc    responses.ResponseService
}

// NewResponses returns a Responses API model.
func NewResponses(cfg Config) *Responses {
	cfg.Info.API = APIResponses
	b := newBase(cfg)
	return &Responses{base: b, compat: cfg.Compat.resolve(b.info.BaseURL, b.info), svc: responses.NewResponseService(b.opts...)}
}

// Info returns the model description.
func (m *Responses) Info() llm.ModelInfo { return m.info }

// responsesID normalises a foreign tool call id: "call|item" parts are
// sanitised; an item id that is not OpenAI's ("fc_...") is dropped.
func responsesID(id string) string {
	call, item, found := strings.Cut(id, "|")
	call = transform.SanitizeID(call, 64)
	if !found {
		return call
	}
	item = transform.SanitizeID(item, 64)
	if !strings.HasPrefix(item, "fc") {
		return call
	}
	return call + "|" + item
}

func rsUserParts(blocks []llm.Content) responses.ResponseInputMessageContentListParam {
	parts := make(responses.ResponseInputMessageContentListParam, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case llm.ContentText:
			parts = append(parts, responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: b.Text}})
		case llm.ContentImage:
			parts = append(parts, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
				Detail: responses.ResponseInputImageDetailAuto, ImageURL: openai.String("data:" + b.MimeType + ";base64," + b.Data)}})
		}
	}
	return parts
}

// assistantItems converts a replayed assistant turn into input items.
func assistantItems(msg llm.Message) []responses.ResponseInputItemUnionParam {
	var items []responses.ResponseInputItemUnionParam
	for _, c := range msg.Content {
		switch c.Type {
		case llm.ContentThinking:
			// The reasoning item goes back verbatim.
			if c.ThinkingSignature != "" && json.Valid([]byte(c.ThinkingSignature)) {
				r := param.Override[responses.ResponseReasoningItemParam](json.RawMessage(c.ThinkingSignature))
				items = append(items, responses.ResponseInputItemUnionParam{OfReasoning: &r})
			}
		case llm.ContentText:
			om := responses.ResponseOutputMessageParam{Status: responses.ResponseOutputMessageStatusCompleted,
				Content: []responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{
					Text: c.Text, Annotations: []responses.ResponseOutputTextAnnotationUnionParam{}}}}}
			if strings.HasPrefix(c.TextSignature, "msg_") {
				om.ID = c.TextSignature
			}
			items = append(items, responses.ResponseInputItemUnionParam{OfOutputMessage: &om})
		case llm.ContentToolCall:
			call, itemID, _ := strings.Cut(c.ID, "|")
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			item := responses.ResponseInputItemParamOfFunctionCall(args, call, c.Name)
			if itemID != "" {
				item.OfFunctionCall.ID = openai.String(itemID)
			}
			items = append(items, item)
		}
	}
	return items
}

func (m *Responses) params(req llm.Request) (responses.ResponseNewParams, error) {
	msgs := transform.Messages(req.Messages, m.info, responsesID)
	var input responses.ResponseInputParam
	if req.SystemPrompt != "" {
		role := responses.EasyInputMessageRoleSystem
		if m.compat.developer || m.info.Reasoning {
			role = responses.EasyInputMessageRoleDeveloper
		}
		input = append(input, responses.ResponseInputItemParamOfMessage(req.SystemPrompt, role))
	}
	for _, msg := range msgs {
		switch msg.Role {
		case llm.RoleUser:
			input = append(input, responses.ResponseInputItemParamOfMessage(rsUserParts(msg.Content), responses.EasyInputMessageRoleUser))
		case llm.RoleAssistant:
			input = append(input, assistantItems(msg)...)
		case llm.RoleToolResult:
			call, _, _ := strings.Cut(msg.ToolCallID, "|")
			text := llm.JoinText(msg.Content, "\n")
			if text == "" {
				text = "(see attached image)"
			}
			out := responses.ResponseInputItemParamOfFunctionCallOutput(text)
			out.OfFunctionCallOutput.CallID = openai.String(call)
			input = append(input, out)
			var imgs []llm.Content
			for _, c := range msg.Content {
				if c.Type == llm.ContentImage {
					imgs = append(imgs, c)
				}
			}
			if len(imgs) > 0 {
				parts := rsUserParts(append([]llm.Content{llm.TextBlock("Attached image(s) from tool result:")}, imgs...))
				input = append(input, responses.ResponseInputItemParamOfMessage(parts, responses.EasyInputMessageRoleUser))
			}
		}
	}
	p := responses.ResponseNewParams{
		Model:           m.info.ID,
		Input:           responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		MaxOutputTokens: openai.Int(maxTokens(m.info, req)),
	}
	if m.compat.store {
		p.Store = openai.Bool(false)
	}
	if req.SessionID != "" {
		p.PromptCacheKey = openai.String(req.SessionID)
	}
	for _, t := range req.Tools {
		params, err := schema(t.Parameters)
		if err != nil {
			return p, fmt.Errorf("%s: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: params, Strict: openai.Bool(false)}})
	}
	eff, on := effort(m.info, req.Thinking)
	if m.info.Reasoning {
		if on {
			p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(eff), Summary: shared.ReasoningSummaryAuto}
			p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
		} else {
			off := "none"
			if v, ok := m.info.ThinkingMap[llm.ThinkingOff]; ok && v != nil {
				off = *v
			}
			p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(off)}
		}
	} else if req.Temperature != nil {
		p.Temperature = openai.Float(*req.Temperature)
	}
	return p, nil
}

// Stream calls the model and yields pi's events.
func (m *Responses) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		b := assemble.New(m.info, yield, nil)
		params, err := m.params(req)
		if err != nil {
			if b.Start() {
				b.Fail(llm.StopError, fmt.Sprintf("%s: encode request: %v", m.info.Provider, err))
			}
			return
		}
		var stream *ssestream.Stream[responses.ResponseStreamEventUnion]
		err = m.client.Do(ctx, func(ctx context.Context) error {
			var resp *http.Response
			s := m.svc.NewStreaming(ctx, params, option.WithResponseInto(&resp))
			if err := s.Err(); err != nil {
				_ = s.Close()
				return m.client.Failure(resp, err)
			}
			stream = s
			return nil
		})
		if err != nil {
			if b.Start() {
				b.FailErr(ctx, err)
			}
			return
		}
		defer stream.Close()
		if !b.Start() {
			return
		}
		m.read(ctx, b, stream)
	}
}

func (m *Responses) read(ctx context.Context, b *assemble.Builder, stream *ssestream.Stream[responses.ResponseStreamEventUnion]) {
	bs := b.Blocks()
	blocks := map[int64]int{} // output_index -> block index
	for stream.Next() {
		e := stream.Current()
		if e.JSON.Response.Valid() {
			b.SetResponse(e.Response.ID, e.Response.Model)
		}
		block := func() (int, bool) { i, ok := blocks[e.OutputIndex]; return i, ok }
		switch e.Type {
		case "response.output_item.added":
			it := e.Item
			var i int
			var ok bool
			switch it.Type {
			case "reasoning":
				i, ok = bs.ThinkingStart()
			case "message":
				i, ok = bs.TextStart()
				if ok {
					bs.At(i).TextSignature = it.ID
				}
			case "function_call":
				i, ok = bs.ToolCallStart(it.CallID+"|"+it.ID, it.Name)
				if args := it.Arguments.OfString; ok && args != "" {
					ok = bs.Delta(i, args)
				}
			default:
				continue
			}
			if !ok {
				return
			}
			blocks[e.OutputIndex] = i
		case "response.reasoning_summary_part.added":
			if i, ok := block(); ok && bs.At(i).Thinking != "" && !bs.Delta(i, "\n\n") {
				return
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
			"response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
			if i, ok := block(); ok && e.Delta != "" && !bs.Delta(i, e.Delta) {
				return
			}
		case "response.output_item.done":
			i, ok := block()
			if !ok {
				continue
			}
			blk := bs.At(i)
			switch e.Item.Type {
			case "reasoning":
				blk.ThinkingSignature = e.JSON.Item.Raw()
			case "function_call":
				args := e.Item.Arguments.OfString
				if string(blk.Arguments) == "{}" && args != "" && args != "{}" {
					if !bs.Delta(i, args) {
						return
					}
				}
			}
			if !bs.End(i) {
				return
			}
		case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
			m.finish(b, e)
			return
		case "error":
			msg := e.Message
			if e.Code != "" {
				msg = e.Code + " " + msg
			}
			b.Fail(llm.StopError, m.info.Provider+": "+strings.TrimSpace(msg))
			return
		}
	}
	if ctx.Err() != nil {
		b.Abort()
		return
	}
	if err := stream.Err(); err != nil {
		b.Fail(llm.StopError, m.info.Provider+": "+streamFailure(err))
		return
	}
	b.Fail(llm.StopError, m.info.Provider+": stream ended without a response.completed event")
}

func (m *Responses) finish(b *assemble.Builder, e responses.ResponseStreamEventUnion) {
	if !e.JSON.Response.Valid() {
		b.Fail(llm.StopError, m.info.Provider+": "+e.Type+" without a response")
		return
	}
	resp := e.Response
	if resp.JSON.Usage.Valid() {
		u := resp.Usage
		cached := u.InputTokensDetails.CachedTokens
		b.SetUsage(llm.Usage{Input: max(u.InputTokens-cached, 0), Output: u.OutputTokens, CacheRead: cached, TotalTokens: u.TotalTokens})
	}
	switch resp.Status {
	case "completed", "":
		if b.HasToolCalls() {
			b.Done(llm.StopToolUse)
		} else {
			b.Done(llm.StopStop)
		}
	case "incomplete":
		b.Done(llm.StopLength)
	default:
		msg := "response " + string(resp.Status)
		if resp.JSON.Error.Valid() {
			msg = strings.TrimSpace(string(resp.Error.Code) + " " + resp.Error.Message)
		}
		b.Fail(llm.StopError, m.info.Provider+": "+msg)
	}
}
