package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	aw "github.com/switchboard-dev/terraform-provider-switchboard/server/llm/anthropicwire"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
)

// The Anthropic-compatible routes under /anthropic/v1 translate
// Anthropic's Messages wire format (server/llm/anthropicwire) to the
// gateway and back, and answer errors in Anthropic's shape so that
// Anthropic's SDKs can read them. A request field the gateway cannot carry
// is refused with a 400 naming it, never dropped.

// anthropicPrefix is the path prefix of the Anthropic-compatible routes
// (their error writer's, and where x-api-key is read).
const anthropicPrefix = "/anthropic/"

// decodeAnthropic decodes an Anthropic request body strictly: a name the
// wire types do not declare is refused, as Anthropic's API refuses it.
func decodeAnthropic(body []byte, v any) error {
	return DecodeJSON(body, v, true)
}

// present reports whether a raw field was sent with a value (not null).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// notCarried is the 400 for a field the gateway does not carry.
func notCarried(field, why string) error {
	return invalidParam(field, "%s is not supported: %s", field, why)
}

// anthropicEffort maps a thinking budget to the reasoning effort whose
// budget the Anthropic adapter sends (the smallest at least as large,
// up to high).
func anthropicEffort(budget int) string {
	switch {
	case budget <= 1024:
		return llm.EffortMinimal
	case budget <= 4096:
		return llm.EffortLow
	case budget <= 16384:
		return llm.EffortMedium
	}
	return llm.EffortHigh
}

// anthropicToolID maps a tool-use id the caller sends back to the model's
// own: the "toolu_" prefix given to other providers' "call_" ids is taken
// off again.
func anthropicToolID(id string) string {
	if rest, ok := strings.CutPrefix(id, "toolu_"); ok && strings.HasPrefix(rest, "call_") {
		return rest
	}
	return id
}

// anthropicWireToolID is the tool-use id a caller sees: the model's own,
// prefixed "toolu_" when it has another form, as Anthropic's SDKs expect.
func anthropicWireToolID(id string) string {
	if strings.HasPrefix(id, "toolu_") {
		return id
	}
	return "toolu_" + id
}

// anthropicShared is what a Messages and a count_tokens request share.
type anthropicShared struct {
	model        string
	system       *aw.System
	messages     []aw.MessageParam
	tools        []aw.Tool
	toolChoice   *aw.ToolChoice
	thinking     *aw.Thinking
	outputConfig *aw.OutputConfig
	mcpServers   json.RawMessage
}

// anthropicRequest translates the shared part of an Anthropic request.
func anthropicRequest(b *anthropicShared) (*llm.Request, error) {
	if present(b.mcpServers) {
		return nil, notCarried("mcp_servers", "Switchboard does not connect models to MCP servers; offer the tools as client tools")
	}
	r := &llm.Request{Model: b.model}
	if b.system != nil {
		texts := make([]string, 0, len(b.system.Blocks))
		for _, bl := range b.system.Blocks {
			texts = append(texts, bl.Text)
		}
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleSystem, Content: strings.Join(texts, "\n\n")})
	}
	for i := range b.messages {
		msgs, err := anthropicMessage(i, &b.messages[i])
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, msgs...)
	}
	if len(b.tools) > llm.MaxFunctions {
		return nil, invalidParam("tools", "at most %d tools", llm.MaxFunctions)
	}
	for i, t := range b.tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, notCarried(fmt.Sprintf("tools.%d.type", i), fmt.Sprintf("%q is one of Anthropic's server tools, which only Anthropic's platform runs; declare client tools (input_schema)", t.Type))
		}
		if t.Name == "" {
			return nil, invalidParam(fmt.Sprintf("tools.%d.name", i), "tools.%d.name is required", i)
		}
		r.Tools = append(r.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict != nil && *t.Strict})
	}
	if tc := b.toolChoice; tc != nil {
		switch tc.Type {
		case aw.ChoiceAuto:
			r.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceAuto}
		case aw.ChoiceAny:
			r.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceRequired}
		case aw.ChoiceTool:
			if tc.Name == "" {
				return nil, invalidParam("tool_choice.name", "tool_choice.name is required when tool_choice.type is tool")
			}
			r.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceFunction, Name: tc.Name}
		case aw.ChoiceNone:
			r.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceNone}
		default:
			return nil, invalidParam("tool_choice.type", "tool_choice.type must be auto, any, tool or none, got %q", tc.Type)
		}
		if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
			no := false
			r.ParallelToolCalls = &no
		}
	}
	if th := b.thinking; th != nil {
		switch th.Type {
		case aw.ThinkingEnabled:
			if th.BudgetTokens < 1024 {
				return nil, invalidParam("thinking.budget_tokens", "thinking.budget_tokens must be at least 1024, got %d", th.BudgetTokens)
			}
			r.ReasoningEffort = anthropicEffort(th.BudgetTokens)
		case aw.ThinkingDisabled:
		case aw.ThinkingAdaptive:
			return nil, notCarried("thinking.type", `adaptive thinking is not carried to providers; send {"type":"enabled","budget_tokens":N}`)
		default:
			return nil, invalidParam("thinking.type", "thinking.type must be enabled or disabled, got %q", th.Type)
		}
	}
	if oc := b.outputConfig; oc != nil {
		switch oc.Effort {
		case "":
		case llm.EffortLow, llm.EffortMedium, llm.EffortHigh:
			if r.ReasoningEffort != "" {
				return nil, invalidParam("output_config.effort", "give either thinking or output_config.effort, not both")
			}
			r.ReasoningEffort = oc.Effort
		default:
			return nil, notCarried("output_config.effort", fmt.Sprintf("effort %q has no equivalent on every provider; use low, medium or high", oc.Effort))
		}
		if f := oc.Format; f != nil {
			if f.Type != "json_schema" {
				return nil, invalidParam("output_config.format.type", "output_config.format.type must be json_schema, got %q", f.Type)
			}
			if !present(f.Schema) {
				return nil, invalidParam("output_config.format.schema", "output_config.format.schema is required")
			}
			r.ResponseFormat = &llm.ResponseFormat{Type: llm.FormatJSONSchema, Name: "output", Schema: f.Schema, Strict: true}
		}
	}
	return r, nil
}

// anthropicMessage translates messages[i]: a user turn becomes a user
// message (its tool_result blocks tool messages, in order), an assistant
// turn one assistant message with its text and tool calls.
func anthropicMessage(i int, m *aw.MessageParam) ([]llm.Message, error) {
	at := func(j int) string { return fmt.Sprintf("messages.%d.content.%d", i, j) }
	if len(m.Content) == 0 {
		return nil, invalidParam(fmt.Sprintf("messages.%d.content", i), "messages.%d.content is required", i)
	}
	var out []llm.Message
	switch m.Role {
	case "assistant":
		msg := llm.Message{Role: llm.RoleAssistant}
		var texts []string
		for j, b := range m.Content {
			switch b.Type {
			case aw.BlockText:
				texts = append(texts, b.Text)
			case aw.BlockToolUse:
				if b.Name == "" || b.ID == "" {
					return nil, invalidParam(at(j), "%s: a tool_use block needs its id and name", at(j))
				}
				args := "{}"
				if present(b.Input) {
					args = string(b.Input)
				}
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: anthropicToolID(b.ID), Name: b.Name, Arguments: args})
			case aw.BlockThinking, aw.BlockRedactedThinking:
				return nil, notCarried(at(j), "thinking blocks are not carried to providers; leave them out of the conversation")
			default:
				return nil, invalidParam(at(j)+".type", "%s.type: an assistant turn holds text and tool_use blocks, got %q", at(j), b.Type)
			}
		}
		msg.Content = strings.Join(texts, "\n")
		return append(out, msg), nil
	case "user":
		var (
			parts  []llm.Part
			texts  []string
			images bool
		)
		flush := func() {
			if len(parts) == 0 {
				return
			}
			msg := llm.Message{Role: llm.RoleUser, Content: strings.Join(texts, "\n")}
			if images {
				msg.Parts = parts
			}
			out = append(out, msg)
			parts, texts, images = nil, nil, false
		}
		for j, b := range m.Content {
			switch b.Type {
			case aw.BlockText:
				parts = append(parts, llm.Part{Text: b.Text})
				texts = append(texts, b.Text)
			case aw.BlockImage:
				img, err := anthropicImage(at(j), b.Source)
				if err != nil {
					return nil, err
				}
				parts = append(parts, llm.Part{Image: img})
				images = true
			case aw.BlockToolResult:
				flush()
				text, err := toolResultText(at(j), b.Content)
				if err != nil {
					return nil, err
				}
				if b.IsError {
					text = "Error: " + text
				}
				if b.ToolUseID == "" {
					return nil, invalidParam(at(j)+".tool_use_id", "%s.tool_use_id is required", at(j))
				}
				out = append(out, llm.Message{Role: llm.RoleTool, Content: text, ToolCallID: anthropicToolID(b.ToolUseID)})
			case aw.BlockThinking, aw.BlockRedactedThinking:
				return nil, notCarried(at(j), "thinking blocks are not carried to providers")
			default:
				return nil, invalidParam(at(j)+".type", "%s.type: a user turn holds text, image and tool_result blocks, got %q", at(j), b.Type)
			}
		}
		flush()
		return out, nil
	}
	return nil, invalidParam(fmt.Sprintf("messages.%d.role", i), "messages.%d.role must be user or assistant, got %q", i, m.Role)
}

// anthropicImage translates an image source: base64 bytes with their
// media type, or an https URL (the gateway fetches or passes it on).
func anthropicImage(field string, src *aw.ImageSource) (*llm.Image, error) {
	if src == nil {
		return nil, invalidParam(field+".source", "%s.source is required", field)
	}
	switch src.Type {
	case aw.SourceBase64:
		data, err := base64.StdEncoding.DecodeString(src.Data)
		if err != nil || len(data) == 0 {
			return nil, invalidParam(field+".source.data", "%s.source.data must be the image as base64", field)
		}
		if src.MediaType == "" {
			return nil, invalidParam(field+".source.media_type", "%s.source.media_type is required", field)
		}
		return &llm.Image{MediaType: src.MediaType, Data: data}, nil
	case aw.SourceURL:
		if !strings.HasPrefix(src.URL, "https://") {
			return nil, invalidParam(field+".source.url", "%s.source.url must be an https URL", field)
		}
		return &llm.Image{URL: src.URL}, nil
	}
	return nil, invalidParam(field+".source.type", "%s.source.type must be base64 or url, got %q", field, src.Type)
}

// toolResultText is a tool_result's content as text (its text blocks
// joined); images in a tool result are not carried.
func toolResultText(field string, c *aw.ToolResultContent) (string, error) {
	if c == nil {
		return "", nil
	}
	texts := make([]string, 0, len(c.Blocks))
	for k, b := range c.Blocks {
		if b.Type != aw.BlockText {
			return "", notCarried(fmt.Sprintf("%s.content.%d", field, k), fmt.Sprintf("a tool result's %s blocks are not carried to providers; send text", b.Type))
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// messagesRequest translates a Messages request.
func messagesRequest(b *aw.MessageRequest) (*llm.Request, error) {
	switch {
	case b.MaxTokens == nil:
		return nil, invalidParam("max_tokens", "max_tokens is required")
	case b.TopK != nil:
		return nil, notCarried("top_k", "no provider receives top_k from Switchboard; use temperature or top_p")
	case present(b.Container):
		return nil, notCarried("container", "containers are Anthropic's code execution platform, which Switchboard does not run")
	case present(b.InferenceGeo):
		return nil, notCarried("inference_geo", "the region is the upstream's configuration")
	case present(b.Speed):
		return nil, notCarried("speed", "fast mode is not carried to providers")
	case present(b.Diagnostics):
		return nil, notCarried("diagnostics", "prompt-cache diagnostics are not carried to providers")
	case present(b.ContextManagement):
		return nil, notCarried("context_management", "context editing is not carried to providers")
	case b.ServiceTier != "" && b.ServiceTier != "auto" && b.ServiceTier != "standard_only":
		return nil, notCarried("service_tier", fmt.Sprintf("service_tier %q is not carried; use auto or standard_only", b.ServiceTier))
	}
	r, err := anthropicRequest(&anthropicShared{model: b.Model, system: b.System, messages: b.Messages, tools: b.Tools,
		toolChoice: b.ToolChoice, thinking: b.Thinking, outputConfig: b.OutputConfig, mcpServers: b.MCPServers})
	if err != nil {
		return nil, err
	}
	r.MaxTokens, r.Temperature, r.TopP, r.Stop = b.MaxTokens, b.Temperature, b.TopP, b.StopSequences
	if b.Metadata != nil {
		r.User = b.Metadata.UserID
	}
	return r, nil
}

// anthropicStop is Anthropic's stop_reason for a finish reason.
func anthropicStop(finish string) string {
	switch finish {
	case llm.FinishLength:
		return aw.StopMaxTokens
	case llm.FinishToolCalls:
		return aw.StopToolUse
	case llm.FinishContentFilter:
		return aw.StopRefusal
	}
	return aw.StopEndTurn
}

// anthropicUsage is Anthropic's usage: input_tokens excludes the tokens
// read from the prompt cache.
func anthropicUsage(u llm.Usage) *aw.Usage {
	return &aw.Usage{InputTokens: u.PromptTokens - u.CachedPromptTokens, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedPromptTokens}
}

// toolInput is a tool call's arguments as a tool_use input object ({} when
// the model wrote something that is not a JSON object).
func toolInput(args string) json.RawMessage {
	s := strings.TrimSpace(args)
	if strings.HasPrefix(s, "{") && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return json.RawMessage(`{}`)
}

func (h *handlers) AnthropicCreateMessage(ctx context.Context, req api.AnthropicCreateMessageRequestObject) (api.AnthropicCreateMessageResponseObject, error) {
	var b aw.MessageRequest
	if err := decodeAnthropic(*req.Body, &b); err != nil {
		return nil, err
	}
	r, err := messagesRequest(&b)
	if err != nil {
		return nil, err
	}
	id := llm.NewID("msg_")
	if b.Stream {
		st, err := h.s.llm.Stream(ctx, llm.OpMessages, r)
		if err != nil {
			return nil, err
		}
		return &anthropicStream{s: h.s, ctx: ctx, st: st, id: id}, nil
	}
	res, err := h.s.llm.Complete(ctx, llm.OpMessages, r)
	if err != nil {
		return nil, err
	}
	content := make([]aw.ContentBlock, 0, 1+len(res.ToolCalls))
	if res.Text != "" {
		content = append(content, aw.TextBlock(res.Text))
	}
	for _, tc := range res.ToolCalls {
		content = append(content, aw.ContentBlock{Type: aw.BlockToolUse, ID: anthropicWireToolID(tc.ID), Name: tc.Name, Input: toolInput(tc.Arguments)})
	}
	stop := anthropicStop(res.FinishReason)
	return &anthropicJSON{v: &aw.Message{ID: id, Type: "message", Role: llm.RoleAssistant, Model: res.Model.ID, Content: content,
		StopReason: &stop, Usage: anthropicUsage(res.Usage)}}, nil
}

func (h *handlers) AnthropicCountTokens(ctx context.Context, req api.AnthropicCountTokensRequestObject) (api.AnthropicCountTokensResponseObject, error) {
	var b aw.CountTokensRequest
	if err := decodeAnthropic(*req.Body, &b); err != nil {
		return nil, err
	}
	r, err := anthropicRequest(&anthropicShared{model: b.Model, system: b.System, messages: b.Messages, tools: b.Tools,
		toolChoice: b.ToolChoice, thinking: b.Thinking, outputConfig: b.OutputConfig, mcpServers: b.MCPServers})
	if err != nil {
		return nil, err
	}
	n, err := h.s.llm.CountTokens(ctx, llm.OpMessages, r)
	if err != nil {
		return nil, err
	}
	return &anthropicJSON{v: &aw.CountTokensResponse{InputTokens: n.InputTokens}}, nil
}

func anthropicModel(m *llm.Model) aw.ModelInfo {
	return aw.ModelInfo{Type: "model", ID: m.ID, DisplayName: m.ID, CreatedAt: m.CreatedAt.UTC(), MaxInputTokens: m.MaxTokens}
}

func (h *handlers) AnthropicListModels(ctx context.Context, req api.AnthropicListModelsRequestObject) (api.AnthropicListModelsResponseObject, error) {
	limit := 20
	if p := req.Params.Limit; p != nil {
		if *p < 1 || *p > 1000 {
			return nil, invalidParam("limit", "limit must be between 1 and 1000, got %d", *p)
		}
		limit = *p
	}
	var models []*llm.Model
	for _, m := range llm.Allowed(ctx, h.s.llm.Catalog.Models()) {
		if m.Has(llm.CapChat) {
			models = append(models, m)
		}
	}
	// Newest first, as Anthropic lists them; ties by id, so pages are stable.
	slices.SortStableFunc(models, func(a, b *llm.Model) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	index := func(id string) (int, error) {
		i := slices.IndexFunc(models, func(m *llm.Model) bool { return m.ID == id })
		if i < 0 {
			return 0, invalidParam("after_id", "no model %q in the list", id)
		}
		return i, nil
	}
	start, end := 0, len(models)
	switch {
	case req.Params.AfterId != nil:
		i, err := index(*req.Params.AfterId)
		if err != nil {
			return nil, err
		}
		start = i + 1
		end = min(start+limit, len(models))
	case req.Params.BeforeId != nil:
		i, err := index(*req.Params.BeforeId)
		if err != nil {
			return nil, err
		}
		end = i
		start = max(0, end-limit)
	default:
		end = min(limit, len(models))
	}
	page := models[start:end]
	out := aw.ModelList{Data: make([]aw.ModelInfo, len(page))}
	for i, m := range page {
		out.Data[i] = anthropicModel(m)
	}
	if len(page) > 0 {
		first, last := page[0].ID, page[len(page)-1].ID
		out.FirstID, out.LastID = &first, &last
	}
	out.HasMore = req.Params.BeforeId == nil && end < len(models) || req.Params.BeforeId != nil && start > 0
	return &anthropicJSON{v: &out}, nil
}

func (h *handlers) AnthropicGetModel(ctx context.Context, req api.AnthropicGetModelRequestObject) (api.AnthropicGetModelResponseObject, error) {
	m, err := h.s.llm.Model(ctx, req.ModelId, true)
	if err != nil {
		return nil, err
	}
	v := anthropicModel(m)
	return &anthropicJSON{v: &v}, nil
}

// anthropicJSON answers 200 with v encoded as JSON.
type anthropicJSON = jsonOK

func (o *anthropicJSON) VisitAnthropicCreateMessageResponse(w http.ResponseWriter) error {
	return o.write(w)
}
func (o *anthropicJSON) VisitAnthropicCountTokensResponse(w http.ResponseWriter) error {
	return o.write(w)
}
func (o *anthropicJSON) VisitAnthropicListModelsResponse(w http.ResponseWriter) error {
	return o.write(w)
}
func (o *anthropicJSON) VisitAnthropicGetModelResponse(w http.ResponseWriter) error {
	return o.write(w)
}

// anthropicPing is the keep-alive of an Anthropic stream.
var anthropicPing = llm.AppendEvent(nil, aw.EventPing, []byte(`{"type":"ping"}`))

// anthropicStream writes Anthropic's event sequence: message_start (once
// the first chunk, which may carry the prompt's usage, is in), then for
// each text run and tool call a content block (start, deltas, stop),
// message_delta with the stop reason and the usage, message_stop. Text
// blocks close when a tool call starts; tool_use blocks stay open until
// the end, so that interleaved tool-call deltas reach their block.
type anthropicStream struct {
	s   *Server
	ctx context.Context
	st  *llm.ResultStream
	id  string
}

func (a *anthropicStream) VisitAnthropicCreateMessageResponse(w http.ResponseWriter) error {
	defer a.st.Close()
	sw := startSSE(w)
	model := a.st.Model().ID
	send := sw.event
	started := false
	start := func(u *llm.Usage) bool {
		if started {
			return true
		}
		started = true
		usage := &aw.Usage{}
		if u != nil {
			usage = anthropicUsage(*u)
			usage.OutputTokens = 0
		}
		return send(aw.EventMessageStart, &aw.MessageStartEvent{Type: aw.EventMessageStart,
			Message: &aw.Message{ID: a.id, Type: "message", Role: llm.RoleAssistant, Model: model, Content: []aw.ContentBlock{}, Usage: usage}})
	}
	next, text := 0, -1 // the next block's index; the open text block's
	tools := map[int]int{}
	var toolBlocks []int
	stopText := func() bool {
		if text < 0 {
			return true
		}
		i := text
		text = -1
		return send(aw.EventContentBlockStop, &aw.ContentBlockStopEvent{Type: aw.EventContentBlockStop, Index: i})
	}
	// Reused for every text delta: each is encoded when it is filled in.
	textDelta := aw.TextDelta{Type: aw.DeltaText}
	deltaEvent := aw.ContentBlockDeltaEvent{Type: aw.EventContentBlockDelta, Delta: &textDelta}
	err := eachChunkKeepAlive(sw, a.st, anthropicPing, func(ch llm.Chunk) bool {
		if !start(ch.Usage) {
			return false
		}
		if ch.Text != "" {
			if text < 0 {
				text = next
				next++
				if !send(aw.EventContentBlockStart, &aw.ContentBlockStartEvent{Type: aw.EventContentBlockStart, Index: text, ContentBlock: aw.TextBlock("")}) {
					return false
				}
			}
			deltaEvent.Index, textDelta.Text = text, ch.Text
			if !send(aw.EventContentBlockDelta, &deltaEvent) {
				return false
			}
		}
		for _, tc := range ch.ToolCalls {
			block, ok := tools[tc.Index]
			if !ok {
				if !stopText() {
					return false
				}
				block = next
				next++
				tools[tc.Index] = block
				toolBlocks = append(toolBlocks, block)
				id := tc.ID
				if id == "" {
					id = llm.NewID("call_")
				}
				if !send(aw.EventContentBlockStart, &aw.ContentBlockStartEvent{Type: aw.EventContentBlockStart, Index: block,
					ContentBlock: aw.ContentBlock{Type: aw.BlockToolUse, ID: anthropicWireToolID(id), Name: tc.Name, Input: json.RawMessage(`{}`)}}) {
					return false
				}
			}
			if tc.Arguments != "" && !send(aw.EventContentBlockDelta, &aw.ContentBlockDeltaEvent{Type: aw.EventContentBlockDelta, Index: block,
				Delta: aw.InputJSONDelta{Type: aw.DeltaInputJSON, PartialJSON: tc.Arguments}}) {
				return false
			}
		}
		return true
	})
	switch {
	case err == errClientGone:
		return nil // Close cancels the upstream and records what was used
	case err != nil:
		a.s.streamFailed(a.ctx, err)
		e := classify(err)
		_, body := anthropicErrorBody(a.ctx, e)
		send(aw.EventError, body)
		return nil
	}
	res := a.st.Result()
	if !start(&res.Usage) || !stopText() {
		return nil
	}
	for _, b := range toolBlocks {
		if !send(aw.EventContentBlockStop, &aw.ContentBlockStopEvent{Type: aw.EventContentBlockStop, Index: b}) {
			return nil
		}
	}
	stop := anthropicStop(res.FinishReason)
	u := anthropicUsage(res.Usage)
	if !send(aw.EventMessageDelta, &aw.MessageDeltaEvent{Type: aw.EventMessageDelta, Delta: aw.MessageDeltaStop{StopReason: &stop},
		Usage: aw.MessageDeltaUsage{OutputTokens: u.OutputTokens, InputTokens: &u.InputTokens, CacheCreationInputTokens: &u.CacheCreationInputTokens, CacheReadInputTokens: &u.CacheReadInputTokens}}) {
		return nil
	}
	send(aw.EventMessageStop, &aw.TypeOnlyEvent{Type: aw.EventMessageStop})
	return nil
}

// anthropicParams are the OpenAI names of request fields (the gateway's
// and the providers' FieldChecker) with their Anthropic names, for
// messages that name the field as the caller sent it.
var anthropicParams = map[string]string{
	"maxTokens":        "max_tokens",
	"topP":             "top_p",
	"stop":             "stop_sequences",
	"toolChoice":       "tool_choice",
	"reasoning_effort": "thinking",
	"response_format":  "output_config.format",
	"user":             "metadata.user_id",
}

// anthropicParam is field under its Anthropic name.
func anthropicParam(field string) string {
	if p, ok := anthropicParams[field]; ok {
		return p
	}
	return snakeCase(field)
}

// anthropicErrorBody maps an error to its status and Anthropic's error
// object (the same mapping as openAIErrorBody's for OpenAI): the message
// names the field at fault.
func anthropicErrorBody(ctx context.Context, e *errs.Error) (int, *aw.ErrorResponse) {
	status := e.Kind.Status()
	typ := "api_error"
	switch e.Kind {
	case errs.Invalid, errs.Validation, errs.UnsupportedMedia, errs.MethodNotAllowed, errs.Conflict, errs.Gone,
		errs.PreconditionFailed, errs.TransformationFailed:
		typ = "invalid_request_error"
		if status == http.StatusUnprocessableEntity {
			status = http.StatusBadRequest
		}
	case errs.Unauthenticated:
		typ = "authentication_error"
	case errs.Forbidden, errs.EgressDenied:
		typ = "permission_error"
	case errs.NotFound:
		typ = "not_found_error"
	case errs.TooLarge:
		typ = "request_too_large"
	case errs.RateLimited:
		typ = "rate_limit_error"
	case errs.BudgetExceeded:
		typ = "billing_error"
	case errs.UpstreamTimeout:
		typ = "timeout_error"
	case errs.Unavailable:
		// Anthropic's SDKs retry 529 overloaded_error, as they should here.
		typ, status = "overloaded_error", 529
	}
	msg := e.Message
	if param, ok := e.Details["param"].(string); ok {
		ap := anthropicParam(param)
		if mapped, ok := anthropicParams[param]; ok {
			msg = strings.ReplaceAll(msg, param, mapped) // a FieldChecker's OpenAI name
		}
		if !strings.HasPrefix(msg, ap) {
			msg = ap + ": " + msg
		}
	} else if ps, ok := e.Details["problems"].([]errs.Problem); ok && len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = anthropicParam(p.Field) + ": " + p.Problem
		}
		if e.Kind == errs.Validation || !strings.Contains(msg, anthropicParam(ps[0].Field)) {
			msg = strings.Join(msgs, "; ")
		}
	}
	return status, &aw.ErrorResponse{Type: "error", Error: aw.ErrorBody{Type: typ, Message: msg}, RequestID: requestid.From(ctx)}
}

// writeAnthropicError is the error writer of the /anthropic/ routes:
// Anthropic's shape, error types and statuses (400 for invalid
// parameters, never 422; 529 when unavailable).
func writeAnthropicError(c echo.Context, _ int, e *errs.Error) {
	_ = c.JSON(anthropicErrorBody(c.Request().Context(), e))
}
