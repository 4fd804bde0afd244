// Package responseswire is OpenAI's Responses API wire format (POST
// /responses, its stored responses and its stream events) as Go types,
// with the decode rules of its unions (input as a string or items, content
// as a string or parts, tool_choice as a string or an object). The
// /openai/v1/responses routes read and write these; translation to the
// gateway's types lives beside the handlers. Unknown fields are ignored
// when decoding; callers that must refuse them read the body's members
// (openaiwire.Fields).
package responseswire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Request is the body of POST /responses.
type Request struct {
	Model              string            `json:"model"`
	Input              Input             `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []Tool            `json:"tools"`
	ToolChoice         *ToolChoice       `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Text               *TextConfig       `json:"text"`
	Reasoning          *Reasoning        `json:"reasoning"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	User               string            `json:"user"`
	SafetyIdentifier   string            `json:"safety_identifier"`
	Metadata           map[string]string `json:"metadata"`
	Store              *bool             `json:"store"`
	PreviousResponseID string            `json:"previous_response_id"`
	Stream             bool              `json:"stream"`
	StreamOptions      *StreamOptions    `json:"stream_options"`
	Truncation         string            `json:"truncation"`
	Background         *bool             `json:"background"`
	Include            []string          `json:"include"`
	ServiceTier        string            `json:"service_tier"`
	PromptCacheKey     string            `json:"prompt_cache_key"`
}

// StreamOptions configures a streamed response.
type StreamOptions struct {
	// IncludeObfuscation asks for random padding on deltas (a side-channel
	// defence); Switchboard sends none either way.
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

// TextOr is a value that is a string or an array of T on the wire: the
// request's input (items), a message's content and a function call's
// output (parts).
type TextOr[T any] struct {
	// Text is the value when it was a string.
	Text string
	// List is the value when it was an array.
	List []T
	// IsText is true when the value was a string.
	IsText bool
}

// Input is the request's input: a string (one user message) or items.
type Input = TextOr[Item]

// UnmarshalJSON reads a string or an array (null leaves v as it is).
func (v *TextOr[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		*v = TextOr[T]{IsText: true}
		return json.Unmarshal(b, &v.Text)
	case len(b) > 0 && b[0] == '[':
		*v = TextOr[T]{}
		return json.Unmarshal(b, &v.List)
	}
	return errors.New("must be a string or an array")
}

// MarshalJSON writes the string or the array.
func (v TextOr[T]) MarshalJSON() ([]byte, error) {
	if v.IsText {
		return json.Marshal(v.Text)
	}
	if v.List == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(v.List)
}

// Item types.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
)

// Content part types.
const (
	PartInputText  = "input_text"
	PartOutputText = "output_text"
	PartInputImage = "input_image"
	PartRefusal    = "refusal"
)

// Item is one input or output item: a message, a function_call or a
// function_call_output. An input message may omit type (OpenAI's "easy"
// input message {role, content}).
type Item struct {
	Type string `json:"type,omitempty"`
	ID   string `json:"id,omitempty"`
	// Status is in_progress, completed or incomplete (output items).
	Status string `json:"status,omitempty"`

	// Role and Content are a message's.
	Role    string   `json:"role,omitempty"`
	Content *Content `json:"content,omitempty"`

	// CallID, Name and Arguments are a function_call's; CallID and Output
	// a function_call_output's.
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	Output    *Output `json:"output,omitempty"`
}

// ItemType is the item's type, message when it was omitted.
func (it *Item) ItemType() string {
	if it.Type == "" {
		return ItemMessage
	}
	return it.Type
}

// Content is a message's content: a string or content parts.
type Content = TextOr[Part]

// Part is a content part: input_text, output_text, refusal or input_image.
type Part struct {
	Type string `json:"type"`
	// Text is an input_text's or output_text's text.
	Text string `json:"text,omitempty"`
	// Refusal is a refusal part's text.
	Refusal string `json:"refusal,omitempty"`
	// ImageURL, Detail and FileID are an input_image's.
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	// Annotations are an output_text's (always [] from Switchboard).
	Annotations []json.RawMessage `json:"annotations,omitempty"`
}

// OutputText is an output_text part as Switchboard writes it: with
// annotations and logprobs present and empty, as OpenAI sends them.
type OutputText struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

// NewOutputText returns an output_text part holding text.
func NewOutputText(text string) OutputText {
	return OutputText{Type: PartOutputText, Text: text, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}}
}

// Output is a function_call_output's output: a string or content parts.
type Output = TextOr[Part]

// Tool is a tool definition; only function tools are carried, in OpenAI's
// flat shape.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Tool choice modes.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function"
)

// ToolChoice is "none", "auto", "required" or {"type":"function","name":...}.
type ToolChoice struct {
	// Mode is none, auto, required or function; for another object form
	// (a built-in tool, allowed_tools) it is that object's type.
	Mode string
	// Name is the function when Mode is function.
	Name string
}

// MarshalJSON writes the string or object form.
func (t ToolChoice) MarshalJSON() ([]byte, error) {
	if t.Mode == ToolChoiceFunction {
		return json.Marshal(struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}{ToolChoiceFunction, t.Name})
	}
	switch t.Mode {
	case ToolChoiceAuto:
		return toolChoiceAuto, nil
	case ToolChoiceNone:
		return toolChoiceNone, nil
	case ToolChoiceRequired:
		return toolChoiceRequired, nil
	}
	return json.Marshal(t.Mode)
}

// The string forms of ToolChoice; shared, never modified.
var (
	toolChoiceAuto     = []byte(`"auto"`)
	toolChoiceNone     = []byte(`"none"`)
	toolChoiceRequired = []byte(`"required"`)
)

// UnmarshalJSON reads the string or object form.
func (t *ToolChoice) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
			*t = ToolChoice{Mode: s}
			return nil
		}
		return fmt.Errorf("tool_choice %q is not one of none, auto, required", s)
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return errors.New(`tool_choice must be none, auto, required or {"type":"function","name":...}`)
	}
	*t = ToolChoice{Mode: o.Type, Name: o.Name}
	return nil
}

// TextConfig is the request's (and the response's) text options.
type TextConfig struct {
	Format    *Format `json:"format,omitempty"`
	Verbosity *string `json:"verbosity,omitempty"`
}

// Format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// Format is text.format: {type: text}, {type: json_object} or
// {type: json_schema, name, schema, description, strict}.
type Format struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Reasoning is the request's (and the response's) reasoning options.
type Reasoning struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary,omitempty"`
}

// Response statuses.
const (
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusInProgress = "in_progress"
	StatusFailed     = "failed"
)

// Response is a response object: answered by POST /responses, retrieved
// by GET /responses/{id}, and carried by the stream's lifecycle events.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"` // *OutputMessage, *FunctionCall
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          Reasoning          `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               TextConfig         `json:"text"`
	ToolChoice         ToolChoice         `json:"tool_choice"`
	Tools              []Tool             `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Background         bool               `json:"background"`
	Usage              *Usage             `json:"usage"`
	User               *string            `json:"user"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	Metadata           map[string]string  `json:"metadata"`
}

// ResponseError is a failed response's error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete: max_output_tokens
// or content_filter.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Usage counts a response's tokens.
type Usage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

// InputTokensDetails splits input_tokens.
type InputTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// OutputTokensDetails splits output_tokens.
type OutputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// OutputMessage is an output message item as Switchboard writes it.
type OutputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []OutputText `json:"content"`
}

// FunctionCall is a function_call output item as Switchboard writes it.
type FunctionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Deleted is the answer of DELETE /responses/{id}.
type Deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// Stream event types, in the order a stream sends them.
const (
	EventCreated                = "response.created"
	EventInProgress             = "response.in_progress"
	EventOutputItemAdded        = "response.output_item.added"
	EventContentPartAdded       = "response.content_part.added"
	EventOutputTextDelta        = "response.output_text.delta"
	EventOutputTextDone         = "response.output_text.done"
	EventContentPartDone        = "response.content_part.done"
	EventFunctionArgumentsDelta = "response.function_call_arguments.delta"
	EventFunctionArgumentsDone  = "response.function_call_arguments.done"
	EventOutputItemDone         = "response.output_item.done"
	EventCompleted              = "response.completed"
	EventIncomplete             = "response.incomplete"
	EventFailed                 = "response.failed"
	EventError                  = "error"
)

// ResponseEvent is a lifecycle event (created, in_progress, completed,
// incomplete, failed) carrying the response.
type ResponseEvent struct {
	Type           string    `json:"type"`
	SequenceNumber int       `json:"sequence_number"`
	Response       *Response `json:"response"`
}

// ItemEvent is output_item.added or output_item.done.
type ItemEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	OutputIndex    int    `json:"output_index"`
	Item           any    `json:"item"`
}

// PartEvent is content_part.added or content_part.done.
type PartEvent struct {
	Type           string     `json:"type"`
	SequenceNumber int        `json:"sequence_number"`
	ItemID         string     `json:"item_id"`
	OutputIndex    int        `json:"output_index"`
	ContentIndex   int        `json:"content_index"`
	Part           OutputText `json:"part"`
}

// TextDeltaEvent is output_text.delta.
type TextDeltaEvent struct {
	Type           string            `json:"type"`
	SequenceNumber int               `json:"sequence_number"`
	ItemID         string            `json:"item_id"`
	OutputIndex    int               `json:"output_index"`
	ContentIndex   int               `json:"content_index"`
	Delta          string            `json:"delta"`
	Logprobs       []json.RawMessage `json:"logprobs"`
}

// TextDoneEvent is output_text.done.
type TextDoneEvent struct {
	Type           string            `json:"type"`
	SequenceNumber int               `json:"sequence_number"`
	ItemID         string            `json:"item_id"`
	OutputIndex    int               `json:"output_index"`
	ContentIndex   int               `json:"content_index"`
	Text           string            `json:"text"`
	Logprobs       []json.RawMessage `json:"logprobs"`
}

// ArgumentsDeltaEvent is function_call_arguments.delta.
type ArgumentsDeltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Delta          string `json:"delta"`
}

// ArgumentsDoneEvent is function_call_arguments.done.
type ArgumentsDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Name           string `json:"name"`
	Arguments      string `json:"arguments"`
}

// ErrorEvent is the error event of a stream that failed.
type ErrorEvent struct {
	Type           string  `json:"type"`
	SequenceNumber int     `json:"sequence_number"`
	Code           string  `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
}
