// Package openaiwire is OpenAI's HTTP wire format (chat completions,
// legacy completions, embeddings, models, errors) as Go types. The openai
// adapter sends and reads these to upstreams; the OpenAI-compatible routes
// under /openai/v1 read and write them for callers, so that both sides agree
// on one definition. Fields follow OpenAI's API reference; unknown fields
// are ignored when decoding, as OpenAI's own SDKs expect.
package openaiwire

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	fastjson "github.com/goccy/go-json"
)

// ChatCompletionRequest is the body of POST /chat/completions.
type ChatCompletionRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	Stop                StringList      `json:"stop,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          *ToolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	User                string          `json:"user,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`

	// Extra are further top-level fields, written verbatim after the
	// others (fields the gateway carries to OpenAI-compatible upstreams
	// without interpreting them: logprobs, logit_bias, service_tier, …).
	// Decoding leaves it empty; callers that want the unknown fields read
	// them with Fields.
	Extra map[string]json.RawMessage `json:"-"`
}

// chatCompletionRequest has ChatCompletionRequest's fields without its
// methods.
type chatCompletionRequest ChatCompletionRequest

// MarshalJSON writes the request with its Extra fields.
func (r ChatCompletionRequest) MarshalJSON() ([]byte, error) {
	b, err := fastjson.Marshal(chatCompletionRequest(r))
	if err != nil {
		return nil, err
	}
	return appendFields(b, r.Extra), nil
}

// appendFields adds extra's members, in name order, to the JSON object b.
func appendFields(b []byte, extra map[string]json.RawMessage) []byte {
	if len(extra) == 0 {
		return b
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = b[:len(b)-1] // drop the closing brace
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, kb...)
		b = append(b, ':')
		b = append(b, extra[k]...)
	}
	return append(b, '}')
}

// Fields returns the top-level members of a JSON object by name, values
// undecoded.
func Fields(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := fastjson.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// ResponseFormat is response_format: {"type":"text"}, {"type":"json_object"}
// or {"type":"json_schema","json_schema":{name, description, schema, strict}}.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is response_format.json_schema.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// StreamOptions configures a streamed response.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one chat message.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Content is a message's content: a string, null, or an array of content
// parts (text and image_url).
type Content struct {
	// Text is the string content, or the text parts joined with newlines.
	Text string
	// Null is true for a JSON null (an assistant turn that only calls tools).
	Null bool
	// Parts, when not nil, is the content as an array of parts, in order:
	// set when decoding an array that holds an image_url part, and encoded
	// as that array (Text is then ignored).
	Parts []ContentPart
	// NonText names the first content part that is neither text nor
	// image_url (input_audio, file), and NonTextIndex its index in the
	// array; callers refuse it.
	NonText      string
	NonTextIndex int
}

// MissingType is NonText for a content part without a type.
const MissingType = "(missing)"

// ContentPart is one element of an array content: {"type":"text","text":...}
// or {"type":"image_url","image_url":{"url":...,"detail":...}}.
type ContentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is an image_url part's image: an https or data: URL and an
// optional detail (auto, low, high).
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// Text returns content holding s.
func Text(s string) Content { return Content{Text: s} }

// MarshalJSON writes a string, null, or the array of Parts.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Null:
		return []byte("null"), nil
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON reads a string, null or an array of content parts. Text
// parts are joined into Text; an array with an image_url part is also
// kept whole in Parts; other part types are named in NonText.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		c.Null = true
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		var parts []ContentPart
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var buf []byte
		n, images := 0, false
		for i, p := range parts {
			switch p.Type {
			case "text":
				if n > 0 {
					buf = append(buf, '\n')
				}
				buf = append(buf, p.Text...)
				n++
			case "image_url":
				images = true
			default:
				if c.NonText == "" {
					c.NonText, c.NonTextIndex = cmp.Or(p.Type, MissingType), i
				}
			}
		}
		c.Text = string(buf)
		if images {
			c.Parts = parts
		}
		return nil
	}
	return errors.New("content must be a string, null or an array of content parts")
}

// Tool is a function tool definition.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function describes a callable function.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is a call the model made (or, in a stream, a fragment of one).
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a called function's name and JSON arguments text.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ToolChoice is "none", "auto", "required" or {"type":"function","function":{"name":...}}.
type ToolChoice struct {
	// Mode is none, auto, required or function.
	Mode string
	// Name is the function when Mode is function.
	Name string
}

// MarshalJSON writes the string or object form.
func (t ToolChoice) MarshalJSON() ([]byte, error) {
	if t.Mode == "function" {
		return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": t.Name}})
	}
	return json.Marshal(t.Mode)
}

// UnmarshalJSON reads the string or object form.
func (t *ToolChoice) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "none", "auto", "required":
			*t = ToolChoice{Mode: s}
			return nil
		}
		return fmt.Errorf("tool_choice %q is not one of none, auto, required", s)
	}
	var o struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	if o.Type != "function" || o.Function.Name == "" {
		return errors.New(`tool_choice object must be {"type":"function","function":{"name":...}}`)
	}
	*t = ToolChoice{Mode: "function", Name: o.Function.Name}
	return nil
}

// StringList is a string or an array of strings on the wire.
type StringList []string

// UnmarshalJSON reads a string, an array of strings or null.
func (s *StringList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = StringList{v}
		return nil
	case len(b) > 0 && b[0] == '[':
		var v []string
		if err := json.Unmarshal(b, &v); err != nil {
			return errors.New("must be a string or an array of strings (token arrays are not supported)")
		}
		*s = v
		return nil
	}
	return errors.New("must be a string or an array of strings")
}

// ChatCompletion is the response of POST /chat/completions.
type ChatCompletion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []Choice `json:"choices"`
	Usage             *Usage   `json:"usage,omitempty"`
	SystemFingerprint *string  `json:"system_fingerprint,omitempty"`
}

// Choice is one completion choice.
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// ResponseMessage is the assistant message of a choice.
type ResponseMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ChatCompletionChunk is one event of a streamed chat completion.
type ChatCompletionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
}

// ChunkChoice is a choice's delta in a chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
}

// Delta is the part of the message a chunk adds.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails splits prompt_tokens; nil when not reported.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails is usage.prompt_tokens_details.
type PromptTokensDetails struct {
	// CachedTokens is the part of prompt_tokens served from the prompt
	// cache.
	CachedTokens int `json:"cached_tokens"`
}

// CompletionRequest is the body of POST /completions (legacy text completions).
type CompletionRequest struct {
	Model            string         `json:"model"`
	Prompt           StringList     `json:"prompt"`
	MaxTokens        *int           `json:"max_tokens,omitempty"`
	Temperature      *float64       `json:"temperature,omitempty"`
	TopP             *float64       `json:"top_p,omitempty"`
	FrequencyPenalty *float64       `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64       `json:"presence_penalty,omitempty"`
	Stop             StringList     `json:"stop,omitempty"`
	N                *int           `json:"n,omitempty"`
	Seed             *int64         `json:"seed,omitempty"`
	Stream           bool           `json:"stream,omitempty"`
	StreamOptions    *StreamOptions `json:"stream_options,omitempty"`
	User             string         `json:"user,omitempty"`

	// Extra are further top-level fields, written verbatim after the
	// others (see ChatCompletionRequest.Extra).
	Extra map[string]json.RawMessage `json:"-"`
}

// completionRequest has CompletionRequest's fields without its methods.
type completionRequest CompletionRequest

// MarshalJSON writes the request with its Extra fields.
func (r CompletionRequest) MarshalJSON() ([]byte, error) {
	b, err := fastjson.Marshal(completionRequest(r))
	if err != nil {
		return nil, err
	}
	return appendFields(b, r.Extra), nil
}

// Completion is the response (and, streamed, each chunk) of POST /completions.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is one text completion.
type CompletionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// EmbeddingRequest is the body of POST /embeddings.
type EmbeddingRequest struct {
	Input          EmbeddingInput `json:"input"`
	Model          string         `json:"model"`
	EncodingFormat string         `json:"encoding_format,omitempty"`
	Dimensions     *int           `json:"dimensions,omitempty"`
	User           string         `json:"user,omitempty"`
}

// EmbeddingInput is an embeddings input: a string, an array of strings,
// an array of token ids, or an array of token-id arrays. Exactly one of
// Texts and Tokens is set after decoding.
type EmbeddingInput struct {
	Texts  []string
	Tokens [][]int
}

// MarshalJSON writes the texts, or the token arrays.
func (in EmbeddingInput) MarshalJSON() ([]byte, error) {
	if in.Tokens != nil {
		return json.Marshal(in.Tokens)
	}
	return json.Marshal(in.Texts)
}

// UnmarshalJSON reads any of the four forms.
func (in *EmbeddingInput) UnmarshalJSON(b []byte) error {
	*in = EmbeddingInput{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '[' {
		return (*StringList)(&in.Texts).UnmarshalJSON(b)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return errors.New("must be a string, an array of strings, an array of token ids or an array of token-id arrays")
	}
	if len(items) == 0 {
		in.Texts = []string{}
		return nil
	}
	switch first := bytes.TrimSpace(items[0]); {
	case len(first) > 0 && first[0] == '"':
		return (*StringList)(&in.Texts).UnmarshalJSON(b)
	case len(first) > 0 && first[0] == '[':
		if err := json.Unmarshal(b, &in.Tokens); err != nil {
			return errors.New("an array of token-id arrays must hold only arrays of non-negative integers")
		}
	default:
		var one []int
		if err := json.Unmarshal(b, &one); err != nil {
			return errors.New("an array of token ids must hold only non-negative integers")
		}
		in.Tokens = [][]int{one}
	}
	for _, ids := range in.Tokens {
		for _, id := range ids {
			if id < 0 {
				return errors.New("token ids must be non-negative integers")
			}
		}
	}
	return nil
}

// EmbeddingResponse is the response of POST /embeddings (float encoding).
type EmbeddingResponse struct {
	Object string      `json:"object"`
	Data   []Embedding `json:"data"`
	Model  string      `json:"model"`
	Usage  *Usage      `json:"usage,omitempty"`
}

// Embedding is one vector.
type Embedding struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

// Model is one entry of GET /models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is vLLM's context length extension.
	MaxModelLen int `json:"max_model_len,omitempty"`
	// Meta is llama.cpp's extension (n_ctx_train, n_embd).
	Meta *ModelMeta `json:"meta,omitempty"`
}

// ModelMeta is llama.cpp's model metadata.
type ModelMeta struct {
	NCtxTrain int `json:"n_ctx_train,omitempty"`
	NEmbd     int `json:"n_embd,omitempty"`
}

// ModelList is the response of GET /models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// ErrorResponse is OpenAI's error body.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody describes an error.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
