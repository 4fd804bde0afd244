package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/anthropicwire"
)

// AnthropicVersion is the anthropic-version header Switchboard sends.
const AnthropicVersion = anthropicwire.Version

// anthropicDefaultMaxTokens is sent as max_tokens (required by the
// Messages API) when the caller sets none; with extended thinking, the
// thinking budget is added to it.
const anthropicDefaultMaxTokens = 4096

// Thinking budgets (budget_tokens) for each reasoning effort. Anthropic's
// minimum budget is 1024 tokens, and max_tokens must exceed the budget.
var anthropicThinkingBudget = map[string]int{
	EffortMinimal: 1024,
	EffortLow:     4096,
	EffortMedium:  16384,
	EffortHigh:    32768,
}

// anthropicMinThinkingBudget is the smallest budget_tokens Anthropic takes.
const anthropicMinThinkingBudget = 1024

// anthropicJSONObjectTool names the forced tool that carries a
// json_object response format without a schema name.
const anthropicJSONObjectTool = "json_object"

// anthropicProvider speaks Anthropic's Messages API (server/llm/anthropicwire):
// system prompt, content blocks with images, tool_use / tool_result,
// streaming events. A response format is carried by a forced tool whose
// input schema is the format's schema (its tool_use input is the answer);
// a reasoning effort by extended thinking with a token budget.
type anthropicProvider struct{ up upstream }

var (
	_ Provider     = (*anthropicProvider)(nil)
	_ FieldChecker = (*anthropicProvider)(nil)
	_ TokenCounter = (*anthropicProvider)(nil)
)

func newAnthropic(up upstream) *anthropicProvider {
	key := up.secret
	up.setAuth = func(h http.Header) {
		if key != "" {
			h.Set("x-api-key", key)
		}
		h.Set("anthropic-version", AnthropicVersion)
	}
	up.errorMessage = jsonErrorMessage
	return &anthropicProvider{up: up}
}

// Unsupported implements FieldChecker: the fields of r the Messages API
// cannot carry, by OpenAI's wire name.
func (p *anthropicProvider) Unsupported(m *Model, r *Request) []string {
	var out []string
	if r.N > 1 {
		out = append(out, "n")
	}
	if r.FrequencyPenalty != nil {
		out = append(out, "frequency_penalty")
	}
	if r.PresencePenalty != nil {
		out = append(out, "presence_penalty")
	}
	if r.Seed != nil {
		out = append(out, "seed")
	}
	if rf := r.ResponseFormat; rf != nil && rf.Type != FormatText {
		name := formatToolName(rf)
		if slices.ContainsFunc(r.Tools, func(t Tool) bool { return t.Name == name }) {
			out = append(out, "response_format") // its forced tool would shadow a caller's tool
		}
	}
	if r.ReasoningEffort != "" {
		_, budget := anthropicMaxTokens(m, r)
		forced := formatTool(r) != nil || r.ToolChoice != nil && (r.ToolChoice.Mode == ToolChoiceRequired || r.ToolChoice.Mode == ToolChoiceFunction)
		// Anthropic refuses extended thinking with a forced tool, with a
		// temperature other than 1, and with a budget under 1024 tokens.
		if _, known := anthropicThinkingBudget[r.ReasoningEffort]; !known || budget < anthropicMinThinkingBudget || forced {
			out = append(out, "reasoning_effort")
		} else if r.Temperature != nil && *r.Temperature != 1 {
			out = append(out, "temperature")
		}
	}
	keys := make([]string, 0, len(r.Passthrough))
	for k := range r.Passthrough {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return append(out, keys...)
}

// formatToolName is the name of the tool that carries rf.
func formatToolName(rf *ResponseFormat) string {
	if rf.Name != "" {
		return rf.Name
	}
	return anthropicJSONObjectTool
}

// formatTool is the forced tool carrying r's response format, or nil.
func formatTool(r *Request) *anthropicwire.Tool {
	rf := r.ResponseFormat
	if rf == nil || (rf.Type != FormatJSONObject && rf.Type != FormatJSONSchema) {
		return nil
	}
	schema := rf.Schema
	if rf.Type == FormatJSONObject || len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := rf.Description
	if desc == "" {
		desc = "Answer by calling this tool: its input is your response, a JSON object conforming to the input schema."
	}
	t := &anthropicwire.Tool{Name: formatToolName(rf), Description: desc, InputSchema: schema}
	if rf.Strict {
		t.Strict = ptrTo(true)
	}
	return t
}

func ptrTo[T any](v T) *T { return &v }

// anthropicMaxTokens is the max_tokens to send for r and, with a reasoning
// effort, the thinking budget (which max_tokens must exceed): the caller's
// max_tokens bounds thinking and answer together, as OpenAI's
// max_completion_tokens bounds reasoning and answer; without one, the
// budget is added to the default.
func anthropicMaxTokens(m *Model, r *Request) (maxTokens, budget int) {
	budget = anthropicThinkingBudget[r.ReasoningEffort]
	switch {
	case r.MaxTokens != nil:
		maxTokens = *r.MaxTokens
	case m.MaxTokens > 0 && m.MaxTokens < anthropicDefaultMaxTokens+budget:
		maxTokens = m.MaxTokens
	default:
		maxTokens = anthropicDefaultMaxTokens + budget
	}
	if budget >= maxTokens {
		budget = maxTokens - 1
	}
	return maxTokens, budget
}

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// anthropicImage is the image block of img: base64 bytes, or the URL
// Anthropic fetches itself (the gateway has decoded data: URLs already).
func anthropicImage(img *Image) anthropicwire.ContentBlock {
	src := &anthropicwire.ImageSource{Type: anthropicwire.SourceURL, URL: img.URL}
	if len(img.Data) > 0 {
		src = &anthropicwire.ImageSource{Type: anthropicwire.SourceBase64, MediaType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data)}
	}
	return anthropicwire.ContentBlock{Type: anthropicwire.BlockImage, Source: src}
}

// userBlocks are a user message's content blocks: its parts in order when
// it has any, else its text.
func userBlocks(msg *Message) []anthropicwire.ContentBlock {
	if msg.Parts == nil {
		if msg.Content == "" {
			return nil
		}
		return []anthropicwire.ContentBlock{anthropicwire.TextBlock(msg.Content)}
	}
	blocks := make([]anthropicwire.ContentBlock, 0, len(msg.Parts))
	for _, part := range msg.Parts {
		switch {
		case part.Image != nil:
			blocks = append(blocks, anthropicImage(part.Image))
		case part.Text != "":
			blocks = append(blocks, anthropicwire.TextBlock(part.Text))
		}
	}
	return blocks
}

func (p *anthropicProvider) request(m *Model, r *Request, stream bool) *anthropicwire.MessageRequest {
	maxTokens, budget := anthropicMaxTokens(m, r)
	w := &anthropicwire.MessageRequest{Model: m.Name, MaxTokens: &maxTokens, Temperature: r.Temperature, TopP: r.TopP, StopSequences: r.Stop, Stream: stream}
	if r.ReasoningEffort != "" {
		w.Thinking = &anthropicwire.Thinking{Type: anthropicwire.ThinkingEnabled, BudgetTokens: budget}
	}
	if r.User != "" {
		w.Metadata = &anthropicwire.Metadata{UserID: r.User}
	}
	msgs := r.Messages
	if len(msgs) == 0 {
		msgs = []Message{{Role: RoleUser, Content: r.Prompt}}
	}
	var system []string
	for i := range msgs {
		msg := &msgs[i]
		var (
			role   string
			blocks []anthropicwire.ContentBlock
		)
		switch msg.Role {
		case RoleSystem:
			system = append(system, msg.Content)
			continue
		case RoleTool:
			role = "user"
			blocks = []anthropicwire.ContentBlock{{Type: anthropicwire.BlockToolResult, ToolUseID: msg.ToolCallID, Content: anthropicwire.ToolResultText(msg.Content)}}
		case RoleAssistant:
			role = "assistant"
			if msg.Content != "" {
				blocks = append(blocks, anthropicwire.TextBlock(msg.Content))
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, anthropicwire.ContentBlock{Type: anthropicwire.BlockToolUse, ID: tc.ID, Name: tc.Name, Input: argumentsObject(tc.Arguments)})
			}
		default:
			role = "user"
			blocks = userBlocks(msg)
		}
		if len(blocks) == 0 {
			continue
		}
		// Anthropic wants alternating turns: merge consecutive same-role
		// messages (e.g. several tool results) into one.
		if n := len(w.Messages); n > 0 && w.Messages[n-1].Role == role {
			w.Messages[n-1].Content = append(w.Messages[n-1].Content, blocks...)
			continue
		}
		w.Messages = append(w.Messages, anthropicwire.MessageParam{Role: role, Content: blocks})
	}
	if len(system) > 0 {
		w.System = anthropicwire.SystemText(strings.Join(system, "\n\n"))
	}
	toolChoiceNone := r.ToolChoice != nil && r.ToolChoice.Mode == ToolChoiceNone
	ft := formatTool(r)
	if ft == nil || !toolChoiceNone {
		for _, t := range r.Tools {
			schema := t.Parameters
			if len(schema) == 0 {
				schema = emptyObjectSchema
			}
			wt := anthropicwire.Tool{Name: t.Name, Description: t.Description, InputSchema: schema}
			if t.Strict {
				wt.Strict = ptrTo(true)
			}
			w.Tools = append(w.Tools, wt)
		}
	}
	disable := r.ParallelToolCalls != nil && !*r.ParallelToolCalls
	var disablePtr *bool
	if disable {
		disablePtr = &disable
	}
	switch {
	case ft != nil:
		// The format's tool is forced: alone, by name; beside the caller's
		// tools, as "any" tool (unless the caller named one).
		w.Tools = append(w.Tools, *ft)
		switch {
		case r.ToolChoice != nil && r.ToolChoice.Mode == ToolChoiceFunction:
			w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceTool, Name: r.ToolChoice.Name, DisableParallelToolUse: disablePtr}
		case len(w.Tools) == 1:
			w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceTool, Name: ft.Name}
		default:
			w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceAny, DisableParallelToolUse: disablePtr}
		}
	case len(r.Tools) > 0 && r.ToolChoice != nil:
		switch r.ToolChoice.Mode {
		case ToolChoiceAuto:
			w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceAuto, DisableParallelToolUse: disablePtr}
		case ToolChoiceRequired:
			w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceAny, DisableParallelToolUse: disablePtr}
		case ToolChoiceFunction:
			w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceTool, Name: r.ToolChoice.Name, DisableParallelToolUse: disablePtr}
		case ToolChoiceNone:
			w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceNone}
		}
	case len(r.Tools) > 0 && disable:
		w.ToolChoice = &anthropicwire.ToolChoice{Type: anthropicwire.ChoiceAuto, DisableParallelToolUse: disablePtr}
	}
	return w
}

// argumentsObject turns tool-call arguments text into a JSON object for
// tool_use.input ({} when it is not one).
func argumentsObject(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return json.RawMessage(`{}`)
}

func anthropicFinish(reason string) string {
	switch reason {
	case anthropicwire.StopMaxTokens, anthropicwire.StopContextLimit:
		return FinishLength
	case anthropicwire.StopToolUse:
		return FinishToolCalls
	case anthropicwire.StopRefusal:
		return FinishContentFilter
	case "":
		return ""
	}
	return FinishStop // end_turn, stop_sequence, pause_turn
}

// anthropicUsage is the gateway's Usage of u: every prompt token
// (Anthropic's input_tokens excludes the tokens written to and read from
// the prompt cache), cache reads as the cached prompt tokens (cache writes
// are priced as input).
func anthropicUsage(u *anthropicwire.Usage) Usage {
	return Usage{PromptTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, CachedPromptTokens: u.CacheReadInputTokens, CompletionTokens: u.OutputTokens}
}

// Complete implements Provider.
func (p *anthropicProvider) Complete(ctx context.Context, m *Model, r *Request) (*Response, error) {
	var out anthropicwire.Message
	if err := p.up.do(ctx, http.MethodPost, "/messages", p.request(m, r, false), &out); err != nil {
		return nil, err
	}
	format := ""
	if ft := formatTool(r); ft != nil {
		format = ft.Name
	}
	stop := ""
	if out.StopReason != nil {
		stop = *out.StopReason
	}
	resp := &Response{ID: out.ID, FinishReason: anthropicFinish(stop)}
	var text strings.Builder
	formatted := false
	for _, b := range out.Content {
		switch b.Type {
		case anthropicwire.BlockText:
			if format == "" {
				text.WriteString(b.Text)
			}
		case anthropicwire.BlockToolUse:
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			if format != "" && b.Name == format {
				// The format's tool: its input is the answer.
				text.WriteString(args)
				formatted = true
				continue
			}
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	if formatted && len(resp.ToolCalls) == 0 && resp.FinishReason == FinishToolCalls {
		resp.FinishReason = FinishStop
	}
	resp.Text = text.String()
	if out.Usage != nil {
		u := anthropicUsage(out.Usage)
		resp.Usage = &u
	}
	return resp, nil
}

// Stream implements Provider.
func (p *anthropicProvider) Stream(ctx context.Context, m *Model, r *Request) (Stream, error) {
	sb, err := p.up.openStream(ctx, "/messages", p.request(m, r, true))
	if err != nil {
		return nil, err
	}
	s := &anthropicStream{sb: sb, toolIndex: map[int]int{}, formatBlock: -1}
	if ft := formatTool(r); ft != nil {
		s.format = ft.Name
	}
	return s, nil
}

type anthropicStream struct {
	sb        *streamBody
	done      bool
	usage     Usage
	toolIndex map[int]int // content block index -> tool call index
	// format names the response format's tool; formatBlock is the index
	// of its content block (-1 before it starts), whose input JSON is
	// passed on as text.
	format      string
	formatBlock int
}

// Next implements Stream.
func (s *anthropicStream) Next() (Chunk, error) {
	for {
		if s.done {
			return Chunk{}, io.EOF
		}
		ev, err := s.sb.next()
		if err != nil {
			if err == io.EOF {
				// The stream ended without message_stop: the upstream hung up.
				return Chunk{}, streamFailure(s.sb.u.provider, "the stream ended before message_stop")
			}
			return Chunk{}, err
		}
		var e anthropicwire.StreamEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return Chunk{}, s.sb.badEvent(err)
		}
		typ := e.Type
		if typ == "" {
			typ = ev.Name
		}
		switch typ {
		case anthropicwire.EventMessageStart:
			if e.Message != nil && e.Message.Usage != nil {
				s.usage = anthropicUsage(e.Message.Usage)
				u := s.usage
				return Chunk{Usage: &u}, nil
			}
		case anthropicwire.EventContentBlockStart:
			if b := e.ContentBlock; b != nil {
				switch b.Type {
				case anthropicwire.BlockToolUse:
					if s.format != "" && b.Name == s.format {
						s.formatBlock = e.Index
						continue
					}
					i := len(s.toolIndex)
					s.toolIndex[e.Index] = i
					return Chunk{ToolCalls: []ToolCallDelta{{Index: i, ID: b.ID, Name: b.Name}}}, nil
				case anthropicwire.BlockText:
					if b.Text != "" && s.format == "" {
						return Chunk{Text: b.Text}, nil
					}
				}
			}
		case anthropicwire.EventContentBlockDelta:
			d := e.Delta
			if d == nil {
				return Chunk{}, s.sb.badEvent(errMissingDelta)
			}
			switch d.Type {
			case anthropicwire.DeltaText:
				if s.format == "" {
					return Chunk{Text: d.Text}, nil
				}
			case anthropicwire.DeltaInputJSON:
				if e.Index == s.formatBlock && d.PartialJSON != "" {
					return Chunk{Text: d.PartialJSON}, nil
				}
				if i, ok := s.toolIndex[e.Index]; ok && d.PartialJSON != "" {
					return Chunk{ToolCalls: []ToolCallDelta{{Index: i, Arguments: d.PartialJSON}}}, nil
				}
			}
		case anthropicwire.EventMessageDelta:
			var out Chunk
			if u := e.Usage; u != nil {
				s.usage.CompletionTokens = u.OutputTokens
				if all := anthropicUsage(u); all.PromptTokens > 0 {
					s.usage.PromptTokens = all.PromptTokens
					s.usage.CachedPromptTokens = all.CachedPromptTokens
				}
				usage := s.usage
				out.Usage = &usage
			}
			if e.Delta != nil {
				out.FinishReason = anthropicFinish(e.Delta.StopReason)
				if out.FinishReason == FinishToolCalls && s.formatBlock >= 0 && len(s.toolIndex) == 0 {
					out.FinishReason = FinishStop // the format's tool answered
				}
			}
			return out, nil
		case anthropicwire.EventMessageStop:
			s.done = true
			return Chunk{}, io.EOF
		case anthropicwire.EventError:
			msg := ""
			if e.Error != nil {
				msg = e.Error.Message
				if e.Error.Type != "" {
					msg = e.Error.Type + ": " + msg
				}
			}
			return Chunk{}, streamFailure(s.sb.u.provider, s.sb.u.redact(msg))
		}
		// ping, content_block_stop, thinking deltas: nothing to pass on.
	}
}

// errMissingDelta is a content_block_delta without its delta.
var errMissingDelta = errors.New("content_block_delta without a delta")

// Close implements Stream.
func (s *anthropicStream) Close() error { return s.sb.close() }

// Embed implements Provider: Anthropic has no embeddings API.
func (p *anthropicProvider) Embed(context.Context, *Model, *EmbedRequest) (*EmbedResponse, error) {
	return nil, upstreamProtocol(p.up.provider, "(Anthropic) offers no embeddings API")
}

// CountTokens implements TokenCounter with Anthropic's own count
// (POST /messages/count_tokens), free of charge upstream.
func (p *anthropicProvider) CountTokens(ctx context.Context, m *Model, r *Request) (int, error) {
	full := p.request(m, r, false)
	body := &anthropicwire.CountTokensRequest{Model: full.Model, Messages: full.Messages, System: full.System, Tools: full.Tools, ToolChoice: full.ToolChoice, Thinking: full.Thinking}
	var out anthropicwire.CountTokensResponse
	if err := p.up.do(ctx, http.MethodPost, "/messages/count_tokens", body, &out); err != nil {
		return 0, err
	}
	return out.InputTokens, nil
}

// Discover implements Provider: GET /models, following has_more/last_id.
func (p *anthropicProvider) Discover(ctx context.Context) ([]ModelInfo, error) {
	var infos []ModelInfo
	after := ""
	for page := 0; page < 20; page++ {
		path := "/models?limit=1000"
		if after != "" {
			path += "&after_id=" + url.QueryEscape(after)
		}
		var out anthropicwire.ModelList
		if err := p.up.do(ctx, http.MethodGet, path, nil, &out); err != nil {
			return nil, err
		}
		for _, d := range out.Data {
			infos = append(infos, ModelInfo{Name: d.ID, Capabilities: []string{CapChat}, MaxTokens: d.MaxInputTokens, CreatedAt: d.CreatedAt})
		}
		if !out.HasMore || out.LastID == nil || *out.LastID == "" {
			break
		}
		after = *out.LastID
	}
	return infos, nil
}
