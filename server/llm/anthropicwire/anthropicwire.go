// Package anthropicwire is Anthropic's Messages API wire format (messages,
// content blocks, tools, streaming events, count_tokens, models, errors) as
// Go types. The anthropic adapter sends and reads these to upstreams; the
// Anthropic-compatible routes under /anthropic/v1 read and write them for
// callers, so that both sides agree on one definition. Fields follow
// Anthropic's API reference. Content blocks, system prompts, tool results
// and tool choices encode exactly the fields of their type, as Anthropic
// sends them.
package anthropicwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Version is the anthropic-version header value these types follow.
const Version = "2023-06-01"

// Content block types.
const (
	BlockText             = "text"
	BlockImage            = "image"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
)

// Image source types.
const (
	SourceBase64 = "base64"
	SourceURL    = "url"
)

// Stop reasons.
const (
	StopEndTurn      = "end_turn"
	StopMaxTokens    = "max_tokens"
	StopSequence     = "stop_sequence"
	StopToolUse      = "tool_use"
	StopPauseTurn    = "pause_turn"
	StopRefusal      = "refusal"
	StopContextLimit = "model_context_window_exceeded"
)

// Tool choice types.
const (
	ChoiceAuto = "auto"
	ChoiceAny  = "any"
	ChoiceTool = "tool"
	ChoiceNone = "none"
)

// Thinking types.
const (
	ThinkingEnabled  = "enabled"
	ThinkingDisabled = "disabled"
	ThinkingAdaptive = "adaptive"
)

// Stream event types.
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventPing              = "ping"
	EventError             = "error"
)

// Delta types of content_block_delta.
const (
	DeltaText      = "text_delta"
	DeltaInputJSON = "input_json_delta"
	DeltaThinking  = "thinking_delta"
	DeltaSignature = "signature_delta"
)

// MessageRequest is the body of POST /v1/messages.
type MessageRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens,omitempty"`
	Messages      []MessageParam  `json:"messages"`
	System        *System         `json:"system,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int            `json:"top_k,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    *ToolChoice     `json:"tool_choice,omitempty"`
	Metadata      *Metadata       `json:"metadata,omitempty"`
	Thinking      *Thinking       `json:"thinking,omitempty"`
	OutputConfig  *OutputConfig   `json:"output_config,omitempty"`
	ServiceTier   string          `json:"service_tier,omitempty"`
	CacheControl  json.RawMessage `json:"cache_control,omitempty"`
	// Fields of Anthropic's API that only Anthropic's own platform serves
	// (server-side containers, MCP connectors, regions, fast mode,
	// diagnostics, context management); decoded so that a caller sending
	// them can be told so, never sent upstream.
	Container         json.RawMessage `json:"container,omitempty"`
	MCPServers        json.RawMessage `json:"mcp_servers,omitempty"`
	InferenceGeo      json.RawMessage `json:"inference_geo,omitempty"`
	Speed             json.RawMessage `json:"speed,omitempty"`
	Diagnostics       json.RawMessage `json:"diagnostics,omitempty"`
	ContextManagement json.RawMessage `json:"context_management,omitempty"`
}

// CountTokensRequest is the body of POST /v1/messages/count_tokens.
type CountTokensRequest struct {
	Model        string          `json:"model"`
	Messages     []MessageParam  `json:"messages"`
	System       *System         `json:"system,omitempty"`
	Tools        []Tool          `json:"tools,omitempty"`
	ToolChoice   *ToolChoice     `json:"tool_choice,omitempty"`
	Thinking     *Thinking       `json:"thinking,omitempty"`
	OutputConfig *OutputConfig   `json:"output_config,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	MCPServers   json.RawMessage `json:"mcp_servers,omitempty"`
}

// CountTokensResponse is the answer of POST /v1/messages/count_tokens.
type CountTokensResponse struct {
	InputTokens int `json:"input_tokens"`
}

// MessageParam is one input message: role user or assistant, content a
// string or content blocks.
type MessageParam struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// Content is a message's content. On the wire it is a string or an array of
// content blocks; a string decodes as one text block, and encodes as an
// array.
type Content []ContentBlock

// UnmarshalJSON reads a string, an array of content blocks or null (no
// content).
func (c *Content) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*c = nil
		return nil
	}
	blocks, _, err := stringOrBlocks(b, "content must be a string or an array of content blocks")
	if err != nil {
		return err
	}
	*c = blocks
	return nil
}

// stringOrBlocks decodes a string (as one text block, str true) or an
// array of content blocks; anything else is an error saying want.
func stringOrBlocks(b []byte, want string) (blocks []ContentBlock, str bool, err error) {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, false, err
		}
		return []ContentBlock{TextBlock(s)}, true, nil
	case len(b) > 0 && b[0] == '[':
		if err := decodeBlocks(b, &blocks); err != nil {
			return nil, false, err
		}
		return blocks, false, nil
	}
	return nil, false, errors.New(want)
}

// marshalStringOrBlocks writes a single text block as a string when str
// is set, else the array of blocks.
func marshalStringOrBlocks(blocks []ContentBlock, str bool) ([]byte, error) {
	if str && len(blocks) == 1 {
		return json.Marshal(blocks[0].Text)
	}
	return json.Marshal(blocks)
}

// decodeBlocks decodes an array of content blocks refusing names a block
// does not declare, as Anthropic's API does ("Extra inputs are not
// permitted").
func decodeBlocks(b []byte, blocks *[]ContentBlock) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(blocks); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return fmt.Errorf("content block field %s: expected %s, got JSON %s", typ.Field, typ.Type, typ.Value)
		}
		return fmt.Errorf("content blocks: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// System is the system prompt: a string or an array of text blocks.
type System struct {
	// Blocks are the text blocks (one for a string).
	Blocks []ContentBlock
	// String is true when the prompt was (or is to be sent as) a string.
	String bool
}

// SystemText returns a system prompt sent as a string.
func SystemText(s string) *System {
	return &System{Blocks: []ContentBlock{TextBlock(s)}, String: true}
}

// MarshalJSON writes a string or an array of text blocks.
func (s System) MarshalJSON() ([]byte, error) { return marshalStringOrBlocks(s.Blocks, s.String) }

// UnmarshalJSON reads a string or an array of text blocks.
func (s *System) UnmarshalJSON(b []byte) error {
	blocks, str, err := stringOrBlocks(b, "system must be a string or an array of text blocks")
	if err != nil {
		return err
	}
	for _, bl := range blocks {
		if bl.Type != BlockText {
			return fmt.Errorf("system blocks must be text blocks, got %q", bl.Type)
		}
	}
	*s = System{Blocks: blocks, String: str}
	return nil
}

// ContentBlock is one content block of any type: text, image, tool_use,
// tool_result, thinking or redacted_thinking. It encodes the fields of its
// Type only.
type ContentBlock struct {
	Type string `json:"type"`
	// Text is a text block's text.
	Text string `json:"text,omitempty"`
	// Source is an image block's source.
	Source *ImageSource `json:"source,omitempty"`
	// ID, Name and Input are a tool_use block's call.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError are a tool_result block's result.
	ToolUseID string             `json:"tool_use_id,omitempty"`
	Content   *ToolResultContent `json:"content,omitempty"`
	IsError   bool               `json:"is_error,omitempty"`
	// Thinking and Signature are a thinking block's; Data a
	// redacted_thinking block's.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// CacheControl is a prompt-cache breakpoint (request blocks only).
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// TextBlock returns a text block.
func TextBlock(s string) ContentBlock { return ContentBlock{Type: BlockText, Text: s} }

// MarshalJSON writes the fields of the block's type, each present even
// when empty (a streamed text block starts as {"type":"text","text":""}).
func (c ContentBlock) MarshalJSON() ([]byte, error) {
	cc := c.CacheControl
	switch c.Type {
	case BlockText:
		return json.Marshal(struct {
			Type         string          `json:"type"`
			Text         string          `json:"text"`
			CacheControl json.RawMessage `json:"cache_control,omitempty"`
		}{c.Type, c.Text, cc})
	case BlockImage:
		return json.Marshal(struct {
			Type         string          `json:"type"`
			Source       *ImageSource    `json:"source"`
			CacheControl json.RawMessage `json:"cache_control,omitempty"`
		}{c.Type, c.Source, cc})
	case BlockToolUse:
		input := c.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		return json.Marshal(struct {
			Type         string          `json:"type"`
			ID           string          `json:"id"`
			Name         string          `json:"name"`
			Input        json.RawMessage `json:"input"`
			CacheControl json.RawMessage `json:"cache_control,omitempty"`
		}{c.Type, c.ID, c.Name, input, cc})
	case BlockToolResult:
		return json.Marshal(struct {
			Type         string             `json:"type"`
			ToolUseID    string             `json:"tool_use_id"`
			Content      *ToolResultContent `json:"content,omitempty"`
			IsError      bool               `json:"is_error,omitempty"`
			CacheControl json.RawMessage    `json:"cache_control,omitempty"`
		}{c.Type, c.ToolUseID, c.Content, c.IsError, cc})
	case BlockThinking:
		return json.Marshal(struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{c.Type, c.Thinking, c.Signature})
	case BlockRedactedThinking:
		return json.Marshal(struct {
			Type string `json:"type"`
			Data string `json:"data"`
		}{c.Type, c.Data})
	}
	type plain ContentBlock
	return json.Marshal(plain(c))
}

// ImageSource is where an image block's bytes come from: base64 data with
// its media type, or a URL Anthropic fetches.
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// ToolResultContent is a tool_result's content: a string or an array of
// text and image blocks.
type ToolResultContent struct {
	// Blocks are the content blocks (one text block for a string).
	Blocks []ContentBlock
	// String is true when the content was (or is to be sent as) a string.
	String bool
}

// ToolResultText returns tool_result content sent as a string.
func ToolResultText(s string) *ToolResultContent {
	return &ToolResultContent{Blocks: []ContentBlock{TextBlock(s)}, String: true}
}

// MarshalJSON writes a string or an array of blocks.
func (t ToolResultContent) MarshalJSON() ([]byte, error) {
	return marshalStringOrBlocks(t.Blocks, t.String)
}

// UnmarshalJSON reads a string or an array of blocks.
func (t *ToolResultContent) UnmarshalJSON(b []byte) error {
	blocks, str, err := stringOrBlocks(b, "tool_result content must be a string or an array of content blocks")
	if err != nil {
		return err
	}
	*t = ToolResultContent{Blocks: blocks, String: str}
	return nil
}

// Tool is a client tool definition.
type Tool struct {
	// Type is empty or "custom" for a client tool; Anthropic's server tools
	// (web_search_..., bash_..., ...) carry their versioned type.
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	Strict       *bool           `json:"strict,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ToolChoice says whether and which tool the model must use: auto, any,
// tool (with Name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use,omitempty"`
}

// Metadata is a request's metadata.
type Metadata struct {
	// UserID is an opaque id of the end user.
	UserID string `json:"user_id,omitempty"`
}

// Thinking configures extended thinking: enabled with a token budget,
// disabled, or adaptive.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// OutputConfig configures the model's output: effort and format.
type OutputConfig struct {
	Effort string        `json:"effort,omitempty"`
	Format *OutputFormat `json:"format,omitempty"`
}

// OutputFormat is a structured output format: type json_schema and its schema.
type OutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Message is the response of POST /v1/messages (and, in message_start,
// the message a stream builds).
type Message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        *Usage         `json:"usage"`
}

// Usage counts a message's tokens. InputTokens excludes the tokens written
// to and read from the prompt cache.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// StreamEvent is any event of a streamed message, for decoding: Type says
// which of the other fields are set.
type StreamEvent struct {
	Type         string        `json:"type"`
	Index        int           `json:"index"`
	Message      *Message      `json:"message"`
	ContentBlock *ContentBlock `json:"content_block"`
	Delta        *Delta        `json:"delta"`
	Usage        *Usage        `json:"usage"`
	Error        *ErrorBody    `json:"error"`
}

// Delta is the delta of a content_block_delta (Type text_delta,
// input_json_delta, thinking_delta, signature_delta) or of a message_delta
// (StopReason, StopSequence), for decoding.
type Delta struct {
	Type         string  `json:"type"`
	Text         string  `json:"text"`
	PartialJSON  string  `json:"partial_json"`
	Thinking     string  `json:"thinking"`
	Signature    string  `json:"signature"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// MessageStartEvent is message_start: the message with empty content.
type MessageStartEvent struct {
	Type    string   `json:"type"`
	Message *Message `json:"message"`
}

// ContentBlockStartEvent is content_block_start: a block at Index begins.
type ContentBlockStartEvent struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	ContentBlock ContentBlock `json:"content_block"`
}

// ContentBlockDeltaEvent is content_block_delta: more of the block at Index.
type ContentBlockDeltaEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

// TextDelta is a content_block_delta's text_delta.
type TextDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// InputJSONDelta is a content_block_delta's input_json_delta: the next
// piece of a tool_use block's input JSON text.
type InputJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

// ContentBlockStopEvent is content_block_stop: the block at Index is complete.
type ContentBlockStopEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// MessageDeltaEvent is message_delta: the stop reason and the final usage.
type MessageDeltaEvent struct {
	Type  string            `json:"type"`
	Delta MessageDeltaStop  `json:"delta"`
	Usage MessageDeltaUsage `json:"usage"`
}

// MessageDeltaStop is a message_delta's delta.
type MessageDeltaStop struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// MessageDeltaUsage is a message_delta's usage: cumulative totals of the
// whole message.
type MessageDeltaUsage struct {
	OutputTokens             int  `json:"output_tokens"`
	InputTokens              *int `json:"input_tokens,omitempty"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens,omitempty"`
}

// TypeOnlyEvent is an event with no other field: message_stop or ping.
type TypeOnlyEvent struct {
	Type string `json:"type"`
}

// ModelInfo is one model of GET /v1/models.
type ModelInfo struct {
	Type        string    `json:"type"`
	ID          string    `json:"id"`
	DisplayName string    `json:"display_name"`
	CreatedAt   time.Time `json:"created_at"`
	// MaxInputTokens is the model's context window, when known.
	MaxInputTokens int `json:"max_input_tokens,omitempty"`
}

// ModelList is the response of GET /v1/models: one page of models.
type ModelList struct {
	Data    []ModelInfo `json:"data"`
	HasMore bool        `json:"has_more"`
	FirstID *string     `json:"first_id"`
	LastID  *string     `json:"last_id"`
}

// ErrorResponse is Anthropic's error body, also sent as a stream's error
// event.
type ErrorResponse struct {
	Type      string    `json:"type"`
	Error     ErrorBody `json:"error"`
	RequestID string    `json:"request_id,omitempty"`
}

// ErrorBody describes an error: its type (invalid_request_error,
// authentication_error, permission_error, not_found_error,
// request_too_large, rate_limit_error, api_error, overloaded_error) and
// message.
type ErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
