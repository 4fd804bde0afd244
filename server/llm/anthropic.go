package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// AnthropicVersion is the anthropic-version header Switchboard sends.
const AnthropicVersion = "2023-06-01"

// anthropicDefaultMaxTokens is sent as max_tokens (required by the
// Messages API) when the caller sets none.
const anthropicDefaultMaxTokens = 4096

// anthropicProvider speaks Anthropic's Messages API: system prompt,
// content blocks, tool_use / tool_result, streaming events.
// frequencyPenalty and presencePenalty have no Anthropic equivalent and are
// not sent.
type anthropicProvider struct{ up upstream }

var _ Provider = (*anthropicProvider)(nil)

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

type anthRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        string          `json:"system,omitempty"`
	Messages      []anthMessage   `json:"messages"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []anthTool      `json:"tools,omitempty"`
	ToolChoice    *anthToolChoice `json:"tool_choice,omitempty"`
	Metadata      *anthMetadata   `json:"metadata,omitempty"`
}

type anthMetadata struct {
	UserID string `json:"user_id"`
}

type anthMessage struct {
	Role    string      `json:"role"`
	Content []anthBlock `json:"content"`
}

// anthBlock is a content block: text, tool_use or tool_result.
type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

type anthTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type anthUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// prompt counts every prompt token: Anthropic's input_tokens excludes
// the tokens written to and read from the prompt cache.
func (u anthUsage) prompt() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// usage is the gateway's Usage; cache reads are the cached prompt tokens
// (cache writes are priced as input).
func (u anthUsage) usage() Usage {
	return Usage{PromptTokens: u.prompt(), CachedPromptTokens: u.CacheReadInputTokens, CompletionTokens: u.OutputTokens}
}

type anthResponse struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Role       string      `json:"role"`
	Model      string      `json:"model"`
	Content    []anthBlock `json:"content"`
	StopReason string      `json:"stop_reason"`
	Usage      *anthUsage  `json:"usage"`
}

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

func (p *anthropicProvider) request(m *Model, r *Request, stream bool) *anthRequest {
	w := &anthRequest{Model: m.Name, Temperature: r.Temperature, TopP: r.TopP, StopSequences: r.Stop, Stream: stream}
	switch {
	case r.MaxTokens != nil:
		w.MaxTokens = *r.MaxTokens
	case m.MaxTokens > 0 && m.MaxTokens < anthropicDefaultMaxTokens:
		w.MaxTokens = m.MaxTokens
	default:
		w.MaxTokens = anthropicDefaultMaxTokens
	}
	if r.User != "" {
		w.Metadata = &anthMetadata{UserID: r.User}
	}
	msgs := r.Messages
	if len(msgs) == 0 {
		msgs = []Message{{Role: RoleUser, Content: r.Prompt}}
	}
	var system []string
	for _, msg := range msgs {
		var (
			role   string
			blocks []anthBlock
		)
		switch msg.Role {
		case RoleSystem:
			system = append(system, msg.Content)
			continue
		case RoleTool:
			role = "user"
			blocks = []anthBlock{{Type: "tool_result", ToolUseID: msg.ToolCallID, Content: msg.Content}}
		case RoleAssistant:
			role = "assistant"
			if msg.Content != "" {
				blocks = append(blocks, anthBlock{Type: "text", Text: msg.Content})
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, anthBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: argumentsObject(tc.Arguments)})
			}
		default:
			role = "user"
			if msg.Content != "" {
				blocks = []anthBlock{{Type: "text", Text: msg.Content}}
			}
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
		w.Messages = append(w.Messages, anthMessage{Role: role, Content: blocks})
	}
	w.System = strings.Join(system, "\n\n")
	for _, t := range r.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = emptyObjectSchema
		}
		w.Tools = append(w.Tools, anthTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if len(r.Tools) > 0 {
		disable := r.ParallelToolCalls != nil && !*r.ParallelToolCalls
		if r.ToolChoice != nil {
			switch r.ToolChoice.Mode {
			case ToolChoiceAuto:
				w.ToolChoice = &anthToolChoice{Type: "auto", DisableParallelToolUse: disable}
			case ToolChoiceRequired:
				w.ToolChoice = &anthToolChoice{Type: "any", DisableParallelToolUse: disable}
			case ToolChoiceFunction:
				w.ToolChoice = &anthToolChoice{Type: "tool", Name: r.ToolChoice.Name, DisableParallelToolUse: disable}
			case ToolChoiceNone:
				w.ToolChoice = &anthToolChoice{Type: "none"}
			}
		} else if disable {
			w.ToolChoice = &anthToolChoice{Type: "auto", DisableParallelToolUse: true}
		}
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
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "refusal":
		return FinishContentFilter
	case "":
		return ""
	}
	return FinishStop // end_turn, stop_sequence, pause_turn
}

// Complete implements Provider.
func (p *anthropicProvider) Complete(ctx context.Context, m *Model, r *Request) (*Response, error) {
	var out anthResponse
	if err := p.up.do(ctx, http.MethodPost, "/messages", p.request(m, r, false), &out); err != nil {
		return nil, err
	}
	resp := &Response{ID: out.ID, FinishReason: anthropicFinish(out.StopReason)}
	var text strings.Builder
	for _, b := range out.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	resp.Text = text.String()
	if out.Usage != nil {
		u := out.Usage.usage()
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
	return &anthropicStream{sb: sb, toolIndex: map[int]int{}}, nil
}

type anthropicStream struct {
	sb        *streamBody
	done      bool
	usage     Usage
	toolIndex map[int]int // content block index -> tool call index
}

type anthEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      *anthResponse   `json:"message"`
	ContentBlock *anthBlock      `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
	Usage        *anthUsage      `json:"usage"`
	Error        *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type anthDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
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
		var e anthEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return Chunk{}, s.sb.badEvent(err)
		}
		typ := e.Type
		if typ == "" {
			typ = ev.Name
		}
		switch typ {
		case "message_start":
			if e.Message != nil && e.Message.Usage != nil {
				s.usage = e.Message.Usage.usage()
				u := s.usage
				return Chunk{Usage: &u}, nil
			}
		case "content_block_start":
			if b := e.ContentBlock; b != nil {
				switch b.Type {
				case "tool_use":
					i := len(s.toolIndex)
					s.toolIndex[e.Index] = i
					return Chunk{ToolCalls: []ToolCallDelta{{Index: i, ID: b.ID, Name: b.Name}}}, nil
				case "text":
					if b.Text != "" {
						return Chunk{Text: b.Text}, nil
					}
				}
			}
		case "content_block_delta":
			var d anthDelta
			if err := json.Unmarshal(e.Delta, &d); err != nil {
				return Chunk{}, s.sb.badEvent(err)
			}
			switch d.Type {
			case "text_delta":
				return Chunk{Text: d.Text}, nil
			case "input_json_delta":
				if i, ok := s.toolIndex[e.Index]; ok && d.PartialJSON != "" {
					return Chunk{ToolCalls: []ToolCallDelta{{Index: i, Arguments: d.PartialJSON}}}, nil
				}
			}
		case "message_delta":
			var d anthDelta
			if len(e.Delta) > 0 {
				if err := json.Unmarshal(e.Delta, &d); err != nil {
					return Chunk{}, s.sb.badEvent(err)
				}
			}
			var out Chunk
			if e.Usage != nil {
				s.usage.CompletionTokens = e.Usage.OutputTokens
				if p := e.Usage.prompt(); p > 0 {
					s.usage.PromptTokens = p
					s.usage.CachedPromptTokens = e.Usage.CacheReadInputTokens
				}
				u := s.usage
				out.Usage = &u
			}
			out.FinishReason = anthropicFinish(d.StopReason)
			return out, nil
		case "message_stop":
			s.done = true
			return Chunk{}, io.EOF
		case "error":
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

// Close implements Stream.
func (s *anthropicStream) Close() error { return s.sb.close() }

// Embed implements Provider: Anthropic has no embeddings API.
func (p *anthropicProvider) Embed(context.Context, *Model, *EmbedRequest) (*EmbedResponse, error) {
	return nil, upstreamProtocol(p.up.provider, "(Anthropic) offers no embeddings API")
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
		var out struct {
			Data []struct {
				ID             string    `json:"id"`
				CreatedAt      time.Time `json:"created_at"`
				MaxInputTokens int       `json:"max_input_tokens"`
			} `json:"data"`
			HasMore bool   `json:"has_more"`
			LastID  string `json:"last_id"`
		}
		if err := p.up.do(ctx, http.MethodGet, path, nil, &out); err != nil {
			return nil, err
		}
		for _, d := range out.Data {
			infos = append(infos, ModelInfo{Name: d.ID, Capabilities: []string{CapChat}, MaxTokens: d.MaxInputTokens, CreatedAt: d.CreatedAt})
		}
		if !out.HasMore || out.LastID == "" {
			break
		}
		after = out.LastID
	}
	return infos, nil
}
