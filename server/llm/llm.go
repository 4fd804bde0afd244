// Package llm is Switchboard's language-model gateway: one Provider
// interface with adapters for OpenAI (and every OpenAI-compatible server),
// Anthropic, Gemini and the built-in offline `local` provider; a Catalog of
// models built from the config file (and optional discovery); and a Gateway
// that validates requests, calls providers with fallbacks, counts tokens when
// an upstream gives none and records usage and cost.
//
// The types here are provider-neutral. They follow OpenAI's chat model
// (messages, tools, tool calls, finish reasons) because that is the lingua
// franca the other adapters translate to and from.
//
// Upstream bodies are encoded and decoded with github.com/goccy/go-json, a
// drop-in for encoding/json that is several times faster on these small
// documents; every LLM request pays for them.
package llm

import (
	"context"
	"encoding/json"
	"time"
)

// Capabilities a model can declare. Chat models serve /v1/chat,
// /v1/generate and /v1/function-calling; embedding models serve
// /v1/embeddings; completion marks a model served by the legacy
// text-completions endpoint of an OpenAI-compatible server.
const (
	CapChat       = "chat"
	CapCode       = "code"
	CapReasoning  = "reasoning"
	CapVision     = "vision"
	CapEmbeddings = "embeddings"
	CapCompletion = "completion"
)

// KnownCapabilities lists every capability value the catalog accepts.
var KnownCapabilities = []string{CapChat, CapCode, CapReasoning, CapVision, CapEmbeddings, CapCompletion}

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons, normalised to OpenAI's values.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
)

// Message is one turn of a conversation.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string
	// Content is the message text (with Parts, their text parts joined by
	// newlines, which is what token estimates count).
	Content string
	// Parts, when not nil, is the message's content in order: text and
	// images. Adapters that map images read Parts; Content stays the text.
	Parts []Part
	// Name optionally names the author.
	Name string
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall
	// ToolCallID links a tool turn to the call it answers.
	ToolCallID string
}

// Part is one piece of a message's content: text or an image.
type Part struct {
	// Text is the text of a text part; empty for an image.
	Text string
	// Image is set for an image part.
	Image *Image
}

// Image is an image in a message. Wire translators set URL as the caller
// sent it (a data: URL or an https URL), or Data and MediaType when the
// wire carries bytes (Anthropic's base64 source). Before a provider sees
// the request the gateway normalises every image: a data: URL is decoded
// into Data and MediaType, and an https URL is either fetched (through the
// egress guard, with size and type limits) or left in URL for a provider
// that fetches images itself.
type Image struct {
	// URL is a data: or https URL; empty when Data is set.
	URL string
	// MediaType is the image's type (image/png, image/jpeg, image/gif, image/webp).
	MediaType string
	// Data is the image's bytes.
	Data []byte
	// Detail is OpenAI's detail hint (auto, low, high); optional.
	Detail string
}

// HasImages reports whether any message carries an image.
func HasImages(msgs []Message) bool {
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Image != nil {
				return true
			}
		}
	}
	return false
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object (may be nil).
	Parameters json.RawMessage
	// Strict asks the provider to guarantee arguments that conform to
	// Parameters (OpenAI's strict function calling).
	Strict bool
}

// Response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ResponseFormat asks for output in a format: any JSON object, or JSON
// conforming to a schema (structured outputs).
type ResponseFormat struct {
	// Type is text, json_object or json_schema.
	Type string
	// Name names the schema (json_schema); providers that use a forced
	// tool call it by this name.
	Name        string
	Description string
	// Schema is the JSON Schema the output must conform to (json_schema).
	Schema json.RawMessage
	// Strict asks the provider to guarantee conformance.
	Strict bool
}

// Reasoning effort levels (OpenAI's reasoning_effort).
const (
	EffortMinimal = "minimal"
	EffortLow     = "low"
	EffortMedium  = "medium"
	EffortHigh    = "high"
)

// Tool choice modes.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function"
)

// ToolChoice says whether and which tool the model must call.
type ToolChoice struct {
	// Mode is auto, none, required or function.
	Mode string
	// Name is the function to call when Mode is function.
	Name string
}

// ToolCall is a call the model made.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON text of the arguments object, as the model wrote it.
	Arguments string
}

// Request is one generation or chat request. A generation is a Request
// with Prompt set and no Messages.
type Request struct {
	// Model is the catalog id (provider/name) asked for.
	Model    string
	Prompt   string
	Messages []Message

	MaxTokens        *int
	Temperature      *float64
	TopP             *float64
	FrequencyPenalty *float64
	PresencePenalty  *float64
	Stop             []string
	Seed             *int64

	Tools             []Tool
	ToolChoice        *ToolChoice
	ParallelToolCalls *bool

	// User is an end-user id passed through to providers that take one.
	User string

	// N is the number of choices to generate (0 and 1 mean one).
	N int
	// ResponseFormat asks for JSON output; nil for free text.
	ResponseFormat *ResponseFormat
	// ReasoningEffort is minimal, low, medium or high for reasoning
	// models; empty for the provider's default.
	ReasoningEffort string
	// Passthrough holds OpenAI request fields the gateway does not
	// interpret but carries verbatim to OpenAI-compatible upstreams
	// (logprobs, top_logprobs, logit_bias, service_tier, metadata,
	// prediction, store), by their wire name. A request whose model's
	// provider cannot carry one of them is refused naming it.
	Passthrough map[string]json.RawMessage

	// format is ResponseFormat compiled by the gateway.
	format *compiledFormat
}

// Usage counts tokens of one call.
type Usage struct {
	// PromptTokens counts every prompt token, cached ones included.
	PromptTokens     int
	CompletionTokens int
	// CachedPromptTokens is the part of PromptTokens the provider served
	// from its prompt cache (priced at Pricing.CachedInput): OpenAI's
	// prompt_tokens_details.cached_tokens, Anthropic's
	// cache_read_input_tokens, Gemini's cachedContentTokenCount.
	CachedPromptTokens int
	// Estimated is true when Switchboard counted the tokens itself because
	// the upstream reported none.
	Estimated bool
}

// Total is PromptTokens + CompletionTokens.
func (u Usage) Total() int { return u.PromptTokens + u.CompletionTokens }

// Response is a provider's answer to a Request.
type Response struct {
	// ID is the upstream's id of the completion, when it gave one.
	ID           string
	Text         string
	ToolCalls    []ToolCall
	FinishReason string
	// Logprobs is the upstream's logprobs object of the first choice,
	// verbatim, when asked for.
	Logprobs json.RawMessage
	// More are the choices after the first when N > 1.
	More []Choice
	// Usage is nil when the upstream reported none.
	Usage *Usage
}

// setChoice sets the choice at index i (the first, or one of More).
func (r *Response) setChoice(i int, c Choice) {
	switch {
	case i == 0:
		r.Text, r.ToolCalls, r.FinishReason, r.Logprobs = c.Text, c.ToolCalls, c.FinishReason, c.Logprobs
	case i > 0 && i < MaxChoices:
		for len(r.More) < i {
			r.More = append(r.More, Choice{})
		}
		r.More[i-1] = c
	}
}

// Choice is one of several choices (Request.N > 1).
type Choice struct {
	Text         string
	ToolCalls    []ToolCall
	FinishReason string
	Logprobs     json.RawMessage
}

// Chunk is one piece of a streamed response.
type Chunk struct {
	// Choice is the index of the choice this chunk extends (N > 1).
	Choice int
	// Text is the next text delta.
	Text string
	// ToolCalls are tool-call deltas: the first delta of a call carries its
	// ID and Name, later ones more Arguments text, matched by Index.
	ToolCalls []ToolCallDelta
	// FinishReason is set on the chunk that ends the response.
	FinishReason string
	// Logprobs is the upstream's logprobs of this chunk, verbatim.
	Logprobs json.RawMessage
	// Usage, when not nil, is the upstream's (cumulative) usage so far.
	Usage *Usage
}

// HasContent reports whether the chunk carries text, tool calls or
// logprobs (a chunk without them only opens, finishes or counts).
func (c Chunk) HasContent() bool {
	return c.Text != "" || len(c.ToolCalls) > 0 || c.Logprobs != nil
}

// ToolCallDelta is a fragment of a streamed tool call.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Stream is a streamed response. Next returns io.EOF after the last chunk.
// Close releases the upstream connection; it is safe to call more than once.
type Stream interface {
	Next() (Chunk, error)
	Close() error
}

// EmbedRequest asks for the embeddings of one or more texts.
type EmbedRequest struct {
	Inputs []string
	// Tokens, when not nil, are the inputs as token arrays of the model's
	// tiktoken encoding, one per input, Inputs holding their decoded text.
	// Only OpenAI's own API receives the tokens (they are its models'
	// tokens); every other provider gets the text.
	Tokens [][]int
	// Dimensions asks models that support it for shorter vectors.
	Dimensions *int
	User       string
}

// EmbedResponse carries one vector per input, in order.
type EmbedResponse struct {
	Vectors [][]float32
	// Usage is nil when the upstream reported none.
	Usage *Usage
}

// ModelInfo is what discovery learns about a provider's model.
type ModelInfo struct {
	Name         string
	Capabilities []string
	MaxTokens    int
	Dimensions   int
	CreatedAt    time.Time
}

// FieldChecker is implemented by providers that cannot carry every
// Request field. Unsupported names, by OpenAI's wire name ("n",
// "logprobs", "reasoning_effort", "response_format",
// "tools[0].function.strict", a Passthrough key), each field of r the
// provider would otherwise drop for model m. The gateway refuses such a
// request with a 400 naming the first, and skips fallbacks that cannot
// carry it, rather than drop a field silently.
type FieldChecker interface {
	Unsupported(m *Model, r *Request) []string
}

// Provider is one upstream language-model service. Implementations are safe
// for concurrent use. Every method receives the catalog model being called;
// model.Name is the upstream's model name.
type Provider interface {
	// Complete runs a chat or generation request to the end.
	Complete(ctx context.Context, model *Model, req *Request) (*Response, error)
	// Stream runs a chat or generation request as a stream. It returns once
	// the upstream has accepted the request (so that refusals are errors
	// here, not in the stream); ctx bounds the whole stream.
	Stream(ctx context.Context, model *Model, req *Request) (Stream, error)
	// Embed returns embeddings.
	Embed(ctx context.Context, model *Model, req *EmbedRequest) (*EmbedResponse, error)
	// Discover lists the provider's models.
	Discover(ctx context.Context) ([]ModelInfo, error)
}
