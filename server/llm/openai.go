package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	fastjson "github.com/goccy/go-json"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/openaiwire"
)

// openAIProvider speaks OpenAI's API: chat completions, legacy completions
// (for models with the completion capability), embeddings and the model
// list. Any OpenAI-compatible server (vLLM, Ollama, llama.cpp, Groq,
// Together, LM Studio) works through it by base URL.
type openAIProvider struct {
	up upstream
	// official is true for api.openai.com, which wants max_completion_tokens.
	official bool
	// ollama, when set, asks an Ollama server what its models can do (Discover).
	ollama *ollamaProbe
}

var _ Provider = (*openAIProvider)(nil)

func newOpenAI(up upstream) *openAIProvider {
	bearer := []string{"Bearer " + up.secret}
	up.setAuth = func(h http.Header) {
		if up.secret != "" {
			h["Authorization"] = bearer
		}
	}
	up.errorMessage = jsonErrorMessage
	return &openAIProvider{up: up, official: strings.Contains(up.baseURL, "://api.openai.com")}
}

// chatRequest translates a Request to OpenAI's chat wire format.
func (p *openAIProvider) chatRequest(m *Model, r *Request, stream bool) *openaiwire.ChatCompletionRequest {
	w := &openaiwire.ChatCompletionRequest{
		Model:            m.Name,
		Temperature:      r.Temperature,
		TopP:             r.TopP,
		FrequencyPenalty: r.FrequencyPenalty,
		PresencePenalty:  r.PresencePenalty,
		Stop:             r.Stop,
		Seed:             r.Seed,
		User:             r.User,
		Stream:           stream,
	}
	if r.N > 1 {
		w.N = &r.N
	}
	w.ReasoningEffort = r.ReasoningEffort
	w.Extra = r.Passthrough
	if rf := r.ResponseFormat; rf != nil {
		w.ResponseFormat = &openaiwire.ResponseFormat{Type: rf.Type}
		if rf.Type == FormatJSONSchema {
			strict := rf.Strict
			w.ResponseFormat.JSONSchema = &openaiwire.JSONSchema{Name: rf.Name, Description: rf.Description, Schema: rf.Schema, Strict: &strict}
		}
	}
	if r.MaxTokens != nil {
		if p.official || m.Has(CapReasoning) {
			w.MaxCompletionTokens = r.MaxTokens
		} else {
			w.MaxTokens = r.MaxTokens
		}
	}
	if stream {
		w.StreamOptions = &openaiwire.StreamOptions{IncludeUsage: true}
	}
	msgs := r.Messages
	if len(msgs) == 0 {
		msgs = []Message{{Role: RoleUser, Content: r.Prompt}}
	}
	w.Messages = make([]openaiwire.Message, len(msgs))
	for i, msg := range msgs {
		wm := openaiwire.Message{Role: msg.Role, Content: openAIContent(msg), Name: msg.Name, ToolCallID: msg.ToolCallID}
		if msg.Role == RoleAssistant && msg.Content == "" && len(msg.ToolCalls) > 0 {
			wm.Content.Null = true
		}
		for _, tc := range msg.ToolCalls {
			wm.ToolCalls = append(wm.ToolCalls, openaiwire.ToolCall{ID: tc.ID, Type: "function", Function: openaiwire.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		w.Messages[i] = wm
	}
	for _, t := range r.Tools {
		f := openaiwire.Function{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
		if t.Strict {
			f.Strict = &t.Strict
		}
		w.Tools = append(w.Tools, openaiwire.Tool{Type: "function", Function: f})
	}
	if r.ToolChoice != nil && len(r.Tools) > 0 {
		w.ToolChoice = &openaiwire.ToolChoice{Mode: r.ToolChoice.Mode, Name: r.ToolChoice.Name}
	}
	if len(r.Tools) > 0 {
		w.ParallelToolCalls = r.ParallelToolCalls
	}
	return w
}

// openAIContent is a message's content: its text, or, when it carries
// images, its parts in order, each image as an image_url part holding its
// https URL or a data: URL of its bytes.
func openAIContent(msg Message) openaiwire.Content {
	if !msg.hasImages() {
		return openaiwire.Text(msg.Content)
	}
	parts := make([]openaiwire.ContentPart, len(msg.Parts))
	for i, p := range msg.Parts {
		if p.Image == nil {
			parts[i] = openaiwire.ContentPart{Type: "text", Text: p.Text}
			continue
		}
		parts[i] = openaiwire.ContentPart{Type: "image_url", ImageURL: &openaiwire.ImageURL{URL: ImageDataURL(p.Image), Detail: p.Image.Detail}}
	}
	return openaiwire.Content{Text: msg.Content, Parts: parts}
}

// completionRequest translates a generation for the legacy endpoint.
func (p *openAIProvider) completionRequest(m *Model, r *Request, stream bool) *openaiwire.CompletionRequest {
	w := &openaiwire.CompletionRequest{
		Model: m.Name, Prompt: openaiwire.StringList{r.Prompt}, MaxTokens: r.MaxTokens,
		Temperature: r.Temperature, TopP: r.TopP, FrequencyPenalty: r.FrequencyPenalty, PresencePenalty: r.PresencePenalty,
		Stop: r.Stop, Seed: r.Seed, User: r.User, Stream: stream, Extra: r.Passthrough,
	}
	if r.N > 1 {
		w.N = &r.N
	}
	if stream {
		w.StreamOptions = &openaiwire.StreamOptions{IncludeUsage: true}
	}
	return w
}

// useCompletions reports whether a request goes to the legacy endpoint.
func useCompletions(m *Model, r *Request) bool {
	return len(r.Messages) == 0 && m.Has(CapCompletion) && !m.Has(CapChat)
}

// Complete implements Provider.
func (p *openAIProvider) Complete(ctx context.Context, m *Model, r *Request) (*Response, error) {
	if useCompletions(m, r) {
		var out openaiwire.Completion
		if err := p.up.do(ctx, http.MethodPost, "/completions", p.completionRequest(m, r, false), &out); err != nil {
			return nil, err
		}
		resp := &Response{ID: out.ID, Usage: fromOpenAIUsage(out.Usage)}
		for _, ch := range out.Choices {
			c := Choice{Text: ch.Text}
			if ch.FinishReason != nil {
				c.FinishReason = *ch.FinishReason
			}
			if len(ch.Logprobs) > 0 && string(ch.Logprobs) != "null" {
				c.Logprobs = ch.Logprobs
			}
			resp.setChoice(ch.Index, c)
		}
		return resp, nil
	}
	var out openaiwire.ChatCompletion
	if err := p.up.do(ctx, http.MethodPost, "/chat/completions", p.chatRequest(m, r, false), &out); err != nil {
		return nil, err
	}
	resp := &Response{ID: out.ID, Usage: fromOpenAIUsage(out.Usage)}
	for _, ch := range out.Choices {
		resp.setChoice(ch.Index, fromOpenAIChoice(ch))
	}
	return resp, nil
}

// fromOpenAIChoice translates one choice of a chat completion.
func fromOpenAIChoice(ch openaiwire.Choice) Choice {
	c := Choice{FinishReason: ch.FinishReason}
	if ch.Message.Content != nil {
		c.Text = *ch.Message.Content
	} else if ch.Message.Refusal != nil {
		c.Text = *ch.Message.Refusal
	}
	if l := ch.Logprobs; len(l) > 0 && string(l) != "null" {
		c.Logprobs = l
	}
	for _, tc := range ch.Message.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return c
}

func fromOpenAIUsage(u *openaiwire.Usage) *Usage {
	if u == nil {
		return nil
	}
	out := &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedPromptTokens = d.CachedTokens
	}
	return out
}

// Stream implements Provider.
func (p *openAIProvider) Stream(ctx context.Context, m *Model, r *Request) (Stream, error) {
	legacy := useCompletions(m, r)
	var (
		body any
		path string
	)
	if legacy {
		body, path = p.completionRequest(m, r, true), "/completions"
	} else {
		body, path = p.chatRequest(m, r, true), "/chat/completions"
	}
	sb, err := p.up.openStream(ctx, path, body)
	if err != nil {
		return nil, err
	}
	return &openAIStream{sb: sb, legacy: legacy}, nil
}

type openAIStream struct {
	sb     *streamBody
	legacy bool
	done   bool
	// pending are chunks of an event that carried several choices.
	pending []Chunk
	// chunk is the event being decoded, reused: its choices keep their
	// array from one event to the next.
	chunk openAIChunk
}

// openAIChunk decodes both chat chunks and legacy completion chunks: the
// fields a stream reads, as values, so that an event costs no allocation
// beyond its strings (null and absent read the same).
type openAIChunk struct {
	Choices []openAIChunkChoice `json:"choices"`
	Usage   *openaiwire.Usage   `json:"usage"`
	Error   json.RawMessage     `json:"error"`
}

// openAIChunkChoice is one choice of a streamed chunk.
type openAIChunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content   string                `json:"content"`
		ToolCalls []openaiwire.ToolCall `json:"tool_calls"`
	} `json:"delta"`
	Text         string        `json:"text"`
	FinishReason string        `json:"finish_reason"`
	Logprobs     rawUnlessNull `json:"logprobs"`
}

// rawUnlessNull is a JSON value as sent, or nil for null.
type rawUnlessNull json.RawMessage

// UnmarshalJSON implements json.Unmarshaler.
func (r *rawUnlessNull) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	*r = bytes.Clone(b)
	return nil
}

// Next implements Stream.
func (s *openAIStream) Next() (Chunk, error) {
	for {
		if len(s.pending) > 0 {
			c := s.pending[0]
			s.pending = s.pending[1:]
			return c, nil
		}
		if s.done {
			return Chunk{}, io.EOF
		}
		ev, err := s.sb.next()
		if err != nil {
			return Chunk{}, err
		}
		data := ev.Data
		if string(data) == "[DONE]" {
			s.done = true
			return Chunk{}, io.EOF
		}
		if len(data) == 0 {
			continue
		}
		c := &s.chunk
		clear(c.Choices[:cap(c.Choices)])
		*c = openAIChunk{Choices: c.Choices[:0]}
		if err := fastjson.Unmarshal(data, c); err != nil {
			return Chunk{}, s.sb.badEvent(err)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			msg := jsonErrorMessage(data)
			return Chunk{}, streamFailure(s.sb.u.provider, s.sb.u.redact(msg))
		}
		var out Chunk
		if c.Usage != nil {
			out.Usage = fromOpenAIUsage(c.Usage)
		}
		for i, ch := range c.Choices {
			if ch.Index < 0 || ch.Index >= MaxChoices {
				continue
			}
			oc := Chunk{Choice: ch.Index}
			if s.legacy {
				oc.Text = ch.Text
			} else {
				oc.Text = ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				idx := 0
				if tc.Index != nil {
					idx = *tc.Index
				}
				oc.ToolCalls = append(oc.ToolCalls, ToolCallDelta{Index: idx, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			oc.FinishReason = ch.FinishReason
			if len(ch.Logprobs) > 0 {
				oc.Logprobs = json.RawMessage(ch.Logprobs)
			}
			if i == 0 {
				oc.Usage = out.Usage
				out = oc
				continue
			}
			s.pending = append(s.pending, oc)
		}
		return out, nil
	}
}

// Close implements Stream.
func (s *openAIStream) Close() error { return s.sb.close() }

// Embed implements Provider.
func (p *openAIProvider) Embed(ctx context.Context, m *Model, r *EmbedRequest) (*EmbedResponse, error) {
	input := openaiwire.EmbeddingInput{Texts: r.Inputs}
	if p.official && r.Tokens != nil {
		input = openaiwire.EmbeddingInput{Tokens: r.Tokens}
	}
	body := openaiwire.EmbeddingRequest{Input: input, Model: m.Name, EncodingFormat: "float", Dimensions: r.Dimensions, User: r.User}
	var out openaiwire.EmbeddingResponse
	if err := p.up.do(ctx, http.MethodPost, "/embeddings", body, &out); err != nil {
		return nil, err
	}
	if len(out.Data) != len(r.Inputs) {
		return nil, upstreamProtocol(p.up.provider, fmt.Sprintf("sent %d embeddings for %d inputs", len(out.Data), len(r.Inputs)))
	}
	vecs := make([][]float32, len(r.Inputs))
	for i, d := range out.Data {
		idx := d.Index
		if idx < 0 || idx >= len(vecs) || vecs[idx] != nil {
			idx = i
		}
		vecs[idx] = d.Embedding
	}
	resp := &EmbedResponse{Vectors: vecs}
	if out.Usage != nil {
		resp.Usage = &Usage{PromptTokens: out.Usage.PromptTokens}
	}
	return resp, nil
}

// Discover implements Provider: GET /models, reading vLLM's max_model_len
// and llama.cpp's meta when present. When the server is Ollama (see
// ollamaProbe), each model's capabilities and lengths come from its
// /api/show instead.
func (p *openAIProvider) Discover(ctx context.Context) ([]ModelInfo, error) {
	var out openaiwire.ModelList
	if err := p.up.do(ctx, http.MethodGet, "/models", nil, &out); err != nil {
		return nil, err
	}
	infos := make([]ModelInfo, 0, len(out.Data))
	for _, d := range out.Data {
		in := ModelInfo{Name: d.ID, MaxTokens: d.MaxModelLen}
		if d.Created > 0 {
			in.CreatedAt = time.Unix(d.Created, 0).UTC()
		}
		if d.Meta != nil && in.MaxTokens == 0 {
			in.MaxTokens = d.Meta.NCtxTrain
		}
		if caps := guessCapabilities(d.ID); caps[0] == CapEmbeddings && d.Meta != nil {
			in.Dimensions = d.Meta.NEmbd
		}
		infos = append(infos, in)
	}
	if p.ollama != nil && len(infos) > 0 {
		if native, ok := p.ollama.native(p.up); ok && p.ollama.detect(ctx, native) {
			p.ollama.describe(ctx, native, infos)
		}
	}
	return infos, nil
}
