package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/openaiwire"
)

// The OpenAI-compatible routes under /openai/v1 translate OpenAI's wire
// format (server/llm/openaiwire) to the gateway and back, and answer errors
// in OpenAI's shape so that OpenAI's SDKs can read them.

// decodeOpenAI decodes an OpenAI request body leniently (unknown fields
// ignored, as OpenAI's SDKs send fields Switchboard does not use). Names
// are still exact and unique, as on OpenAI's own API: a known field in
// another case ("MODEL") or a name given twice is a 400 (see DecodeJSON). The
// body reaches the handler unchecked (see strictJSON.Deserialize): goccy
// decodes it, and a body it refuses is decoded again by encoding/json,
// whose errors say what is wrong and where (an empty body included).
func decodeOpenAI(body []byte, v any) error {
	err := DecodeJSON(body, v, false)
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		if ps, ok := e.Details["problems"].([]errs.Problem); ok && len(ps) > 0 {
			e.Details["param"] = ps[0].Field // already OpenAI's name, as sent
		}
	}
	return err
}

// invalidParam is a 400 naming the OpenAI parameter at fault.
func invalidParam(param, format string, args ...any) error {
	return errs.E(errs.Invalid, format, args...).WithDetails(map[string]any{"problems": []errs.Problem{{Field: param, Problem: fmt.Sprintf(format, args...)}}})
}

// chatFieldsCarried are the chat completion request fields the gateway
// translates; every other field sent with a value goes to the upstream
// verbatim (llm.Request.Passthrough), or is refused for a provider that
// cannot carry it.
var chatFieldsCarried = map[string]bool{
	"model": true, "messages": true, "max_tokens": true, "max_completion_tokens": true, "temperature": true,
	"top_p": true, "frequency_penalty": true, "presence_penalty": true, "stop": true, "n": true, "seed": true,
	"stream": true, "stream_options": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"user": true, "response_format": true, "reasoning_effort": true,
}

// chatFieldsRefused are chat completion fields no route carries: their
// output (audio) or their semantics (the deprecated function calling)
// would be lost.
var chatFieldsRefused = map[string]string{
	"audio":         "audio output is not supported",
	"functions":     "the deprecated functions parameter is not supported; send tools",
	"function_call": "the deprecated function_call parameter is not supported; send tool_choice",
}

// passthrough collects the fields of an OpenAI request body outside
// carried, refusing those in refused. A field whose value is null, false,
// {} or [] asks for nothing and is left out, so that SDKs that send
// defaults do not trip providers that cannot carry the field.
func passthrough(body []byte, carried map[string]bool, refused map[string]string) (map[string]json.RawMessage, error) {
	fields, err := openaiwire.Fields(body)
	if err != nil {
		return nil, nil // the typed decode has already accepted the body
	}
	var out map[string]json.RawMessage
	for name, v := range fields {
		if carried[name] || neutralJSON(v) {
			continue
		}
		if why, ok := refused[name]; ok {
			return nil, invalidParam(name, "%s", why)
		}
		if name == "modalities" && string(bytes.Join(bytes.Fields(v), nil)) == `["text"]` {
			continue
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[name] = v
	}
	return out, nil
}

// neutralJSON reports whether v is null, false, {} or [].
func neutralJSON(v json.RawMessage) bool {
	switch string(bytes.Join(bytes.Fields(v), nil)) {
	case "null", "false", "{}", "[]":
		return true
	}
	return false
}

// compatResponseFormat translates response_format.
func compatResponseFormat(f *openaiwire.ResponseFormat) (*llm.ResponseFormat, error) {
	if f == nil || f.Type == llm.FormatText {
		return nil, nil
	}
	rf := &llm.ResponseFormat{Type: f.Type}
	if f.Type == llm.FormatJSONSchema {
		if f.JSONSchema == nil {
			return nil, invalidParam("response_format.json_schema", "is required when response_format.type is json_schema")
		}
		js := f.JSONSchema
		rf.Name, rf.Description, rf.Schema = js.Name, js.Description, js.Schema
		rf.Strict = js.Strict != nil && *js.Strict
	}
	return rf, nil
}

// compatChatRequest translates an OpenAI chat request; body is the raw
// request, read for the fields the gateway passes through.
func compatChatRequest(b *openaiwire.ChatCompletionRequest, body []byte) (*llm.Request, error) {
	r := &llm.Request{
		Model: b.Model, Temperature: b.Temperature, TopP: b.TopP, FrequencyPenalty: b.FrequencyPenalty,
		PresencePenalty: b.PresencePenalty, Stop: b.Stop, Seed: b.Seed, User: b.User, ParallelToolCalls: b.ParallelToolCalls,
		MaxTokens: b.MaxTokens, ReasoningEffort: b.ReasoningEffort,
	}
	if b.N != nil {
		if *b.N < 1 {
			return nil, invalidParam("n", "must be at least 1, got %d", *b.N)
		}
		r.N = *b.N
	}
	var err error
	if r.ResponseFormat, err = compatResponseFormat(b.ResponseFormat); err != nil {
		return nil, err
	}
	if r.Passthrough, err = passthrough(body, chatFieldsCarried, chatFieldsRefused); err != nil {
		return nil, err
	}
	if b.MaxCompletionTokens != nil {
		r.MaxTokens = b.MaxCompletionTokens
	}
	r.Messages = make([]llm.Message, len(b.Messages))
	for i, m := range b.Messages {
		if m.Content.NonText != "" {
			return nil, invalidParam(fmt.Sprintf("messages[%d].content[%d].type", i, m.Content.NonTextIndex),
				"content parts of type %q are not supported; send text and image_url parts", m.Content.NonText)
		}
		role := m.Role
		if role == "developer" {
			role = llm.RoleSystem
		}
		msg := llm.Message{Role: role, Content: m.Content.Text, Name: m.Name, ToolCallID: m.ToolCallID}
		parts, err := compatParts(i, role, m.Content.Parts)
		if err != nil {
			return nil, err
		}
		msg.Parts = parts
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		r.Messages[i] = msg
	}
	if len(b.Tools) > llm.MaxFunctions {
		return nil, invalidParam("tools", "at most %d tools", llm.MaxFunctions)
	}
	for i, t := range b.Tools {
		if t.Type != "function" {
			return nil, invalidParam(fmt.Sprintf("tools[%d].type", i), "only function tools are supported, got %q", t.Type)
		}
		if t.Function.Name == "" {
			return nil, invalidParam(fmt.Sprintf("tools[%d].function.name", i), "is required")
		}
		r.Tools = append(r.Tools, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters,
			Strict: t.Function.Strict != nil && *t.Function.Strict})
	}
	if tc := b.ToolChoice; tc != nil {
		r.ToolChoice = &llm.ToolChoice{Mode: tc.Mode, Name: tc.Name}
	}
	return r, nil
}

// compatParts translates the content parts of messages[i] (nil when its
// content has no image): text parts and image_url parts, in order; images
// only in user messages, as on OpenAI's API. The gateway checks and
// decodes the images themselves.
func compatParts(i int, role string, in []openaiwire.ContentPart) ([]llm.Part, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]llm.Part, len(in))
	for j, p := range in {
		if p.Type == "text" {
			out[j] = llm.Part{Text: p.Text}
			continue
		}
		if role != llm.RoleUser {
			return nil, invalidParam(fmt.Sprintf("messages[%d].content[%d].type", i, j), "image_url parts are only accepted in user messages, not in %s messages", role)
		}
		at := fmt.Sprintf("messages[%d].content[%d].image_url", i, j)
		if p.ImageURL == nil || p.ImageURL.URL == "" {
			return nil, invalidParam(at+".url", "is required on image_url parts")
		}
		switch p.ImageURL.Detail {
		case "", "auto", "low", "high", "original":
		default:
			return nil, invalidParam(at+".detail", "must be auto, low, high or original, got %q", p.ImageURL.Detail)
		}
		out[j] = llm.Part{Image: &llm.Image{URL: p.ImageURL.URL, Detail: p.ImageURL.Detail}}
	}
	return out, nil
}

func compatUsage(u llm.Usage) *openaiwire.Usage {
	out := &openaiwire.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total()}
	if u.CachedPromptTokens > 0 {
		out.PromptTokensDetails = &openaiwire.PromptTokensDetails{CachedTokens: u.CachedPromptTokens}
	}
	return out
}

func compatToolCalls(calls []llm.ToolCall) []openaiwire.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]openaiwire.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = openaiwire.ToolCall{ID: c.ID, Type: "function", Function: openaiwire.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

func (h *handlers) OpenaiCreateChatCompletion(ctx context.Context, req api.OpenaiCreateChatCompletionRequestObject) (api.OpenaiCreateChatCompletionResponseObject, error) {
	var b openaiwire.ChatCompletionRequest
	if err := decodeOpenAI(*req.Body, &b); err != nil {
		return nil, err
	}
	r, err := compatChatRequest(&b, *req.Body)
	if err != nil {
		return nil, err
	}
	id := llm.NewID("chatcmpl-")
	if b.Stream {
		st, err := h.s.llm.Stream(ctx, llm.OpCompatChat, r)
		if err != nil {
			return nil, err
		}
		return &compatStream{s: h.s, ctx: ctx, st: st, id: id, chat: true, includeUsage: b.StreamOptions != nil && b.StreamOptions.IncludeUsage}, nil
	}
	res, err := h.s.llm.Complete(ctx, llm.OpCompatChat, r)
	if err != nil {
		return nil, err
	}
	choices := make([]openaiwire.Choice, 1, 1+len(res.More))
	choices[0] = compatChoice(0, llm.Choice{Text: res.Text, ToolCalls: res.ToolCalls, FinishReason: res.FinishReason, Logprobs: res.Logprobs})
	for i, ch := range res.More {
		choices = append(choices, compatChoice(i+1, ch))
	}
	return &openAIJSON{header: outputHeader(res.Output), v: &openaiwire.ChatCompletion{
		ID: id, Object: "chat.completion", Created: res.CreatedAt.Unix(), Model: res.Model.ID,
		Choices: choices, Usage: compatUsage(res.Usage),
	}}, nil
}

// compatChoice is one choice of a chat completion.
func compatChoice(i int, ch llm.Choice) openaiwire.Choice {
	msg := openaiwire.ResponseMessage{Role: llm.RoleAssistant, ToolCalls: compatToolCalls(ch.ToolCalls)}
	if ch.Text != "" || len(ch.ToolCalls) == 0 {
		text := ch.Text
		msg.Content = &text
	}
	return openaiwire.Choice{Index: i, Message: msg, FinishReason: ch.FinishReason, Logprobs: ch.Logprobs}
}

func (h *handlers) OpenaiCreateCompletion(ctx context.Context, req api.OpenaiCreateCompletionRequestObject) (api.OpenaiCreateCompletionResponseObject, error) {
	var b openaiwire.CompletionRequest
	if err := decodeOpenAI(*req.Body, &b); err != nil {
		return nil, err
	}
	if len(b.Prompt) > 1 {
		return nil, invalidParam("prompt", "only one prompt per request is supported")
	}
	r := &llm.Request{Model: b.Model, MaxTokens: b.MaxTokens, Temperature: b.Temperature, TopP: b.TopP,
		FrequencyPenalty: b.FrequencyPenalty, PresencePenalty: b.PresencePenalty, Stop: b.Stop, Seed: b.Seed, User: b.User}
	if b.N != nil {
		if *b.N < 1 {
			return nil, invalidParam("n", "must be at least 1, got %d", *b.N)
		}
		r.N = *b.N
	}
	if len(b.Prompt) == 1 {
		r.Prompt = b.Prompt[0]
	}
	var err error
	if r.Passthrough, err = passthrough(*req.Body, completionFieldsCarried, nil); err != nil {
		return nil, err
	}
	id := llm.NewID("cmpl-")
	if b.Stream {
		st, err := h.s.llm.Stream(ctx, llm.OpCompatCompletion, r)
		if err != nil {
			return nil, err
		}
		return &compatStream{s: h.s, ctx: ctx, st: st, id: id, includeUsage: b.StreamOptions != nil && b.StreamOptions.IncludeUsage}, nil
	}
	res, err := h.s.llm.Complete(ctx, llm.OpCompatCompletion, r)
	if err != nil {
		return nil, err
	}
	finish := res.FinishReason
	choices := []openaiwire.CompletionChoice{{Text: res.Text, Index: 0, FinishReason: &finish, Logprobs: res.Logprobs}}
	for i, ch := range res.More {
		f := ch.FinishReason
		choices = append(choices, openaiwire.CompletionChoice{Text: ch.Text, Index: i + 1, FinishReason: &f, Logprobs: ch.Logprobs})
	}
	return &openAIJSON{v: &openaiwire.Completion{
		ID: id, Object: "text_completion", Created: res.CreatedAt.Unix(), Model: res.Model.ID,
		Choices: choices, Usage: compatUsage(res.Usage),
	}}, nil
}

// completionFieldsCarried are the legacy completion request fields the
// gateway translates (see chatFieldsCarried).
var completionFieldsCarried = map[string]bool{
	"model": true, "prompt": true, "max_tokens": true, "temperature": true, "top_p": true, "frequency_penalty": true,
	"presence_penalty": true, "stop": true, "n": true, "seed": true, "stream": true, "stream_options": true, "user": true,
}

// compatEmbedding is an embedding in float or base64 encoding.
type compatEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func (h *handlers) OpenaiCreateEmbedding(ctx context.Context, req api.OpenaiCreateEmbeddingRequestObject) (api.OpenaiCreateEmbeddingResponseObject, error) {
	var b openaiwire.EmbeddingRequest
	if err := decodeOpenAI(*req.Body, &b); err != nil {
		return nil, err
	}
	switch b.EncodingFormat {
	case "", "float", "base64":
	default:
		return nil, invalidParam("encoding_format", "must be float or base64, got %q", b.EncodingFormat)
	}
	res, err := h.s.llm.Embed(ctx, b.Model, llm.EmbedRequest{Inputs: b.Input.Texts, Tokens: b.Input.Tokens, Dimensions: b.Dimensions, User: b.User}, "input")
	if err != nil {
		return nil, err
	}
	data := make([]compatEmbedding, len(res.Vectors))
	for i, v := range res.Vectors {
		data[i] = compatEmbedding{Object: "embedding", Index: i, Embedding: v}
		if b.EncodingFormat == "base64" {
			raw := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(raw)
		}
	}
	return &openAIJSON{v: map[string]any{
		"object": "list", "data": data, "model": res.Model.ID,
		"usage": map[string]int{"prompt_tokens": res.Usage.PromptTokens, "total_tokens": res.Usage.PromptTokens},
	}}, nil
}

func compatModel(m *llm.Model) openaiwire.Model {
	return openaiwire.Model{ID: m.ID, Object: "model", Created: m.CreatedAt.Unix(), OwnedBy: m.Provider}
}

func (h *handlers) OpenaiListModels(ctx context.Context, _ api.OpenaiListModelsRequestObject) (api.OpenaiListModelsResponseObject, error) {
	models := llm.Allowed(ctx, h.s.llm.Catalog.Models())
	out := openaiwire.ModelList{Object: "list", Data: make([]openaiwire.Model, len(models))}
	for i, m := range models {
		out.Data[i] = compatModel(m)
	}
	return &openAIJSON{v: &out}, nil
}

func (h *handlers) OpenaiGetModel(ctx context.Context, req api.OpenaiGetModelRequestObject) (api.OpenaiGetModelResponseObject, error) {
	m, err := h.s.llm.Model(ctx, req.Model, true)
	if err != nil {
		return nil, err
	}
	v := compatModel(m)
	return &openAIJSON{v: &v}, nil
}

func (h *handlers) OpenaiGetProviderModel(ctx context.Context, req api.OpenaiGetProviderModelRequestObject) (api.OpenaiGetProviderModelResponseObject, error) {
	m, err := h.s.llm.Model(ctx, req.Provider+"/"+req.Name, false)
	if err != nil {
		return nil, err
	}
	v := compatModel(m)
	return &openAIJSON{v: &v}, nil
}

// openAIJSON answers 200 with v encoded as JSON.
type openAIJSON = jsonOK

func (o *openAIJSON) VisitOpenaiCreateChatCompletionResponse(w http.ResponseWriter) error {
	return o.write(w)
}
func (o *openAIJSON) VisitOpenaiCreateCompletionResponse(w http.ResponseWriter) error {
	return o.write(w)
}
func (o *openAIJSON) VisitOpenaiCreateEmbeddingResponse(w http.ResponseWriter) error {
	return o.write(w)
}
func (o *openAIJSON) VisitOpenaiListModelsResponse(w http.ResponseWriter) error { return o.write(w) }
func (o *openAIJSON) VisitOpenaiGetModelResponse(w http.ResponseWriter) error   { return o.write(w) }
func (o *openAIJSON) VisitOpenaiGetProviderModelResponse(w http.ResponseWriter) error {
	return o.write(w)
}

// compatStream writes an OpenAI stream: chat.completion.chunk (chat) or
// text_completion (legacy) events, a usage chunk when asked, then [DONE].
type compatStream struct {
	s            *Server
	ctx          context.Context
	st           *llm.ResultStream
	id           string
	chat         bool
	includeUsage bool
}

func (c *compatStream) VisitOpenaiCreateChatCompletionResponse(w http.ResponseWriter) error {
	return c.write(w)
}
func (c *compatStream) VisitOpenaiCreateCompletionResponse(w http.ResponseWriter) error {
	return c.write(w)
}

func (c *compatStream) write(w http.ResponseWriter) error {
	defer c.st.Close()
	sw := startSSE(w)
	created := c.st.CreatedAt.Unix()
	model := c.st.Model().ID
	send := func(v any) bool { return sw.event("", v) }
	// One chunk value each, reused for every event: each is encoded as
	// soon as it is filled in.
	chat := openaiwire.ChatCompletionChunk{ID: c.id, Object: "chat.completion.chunk", Created: created, Model: model,
		Choices: make([]openaiwire.ChunkChoice, 1)}
	chatChunk := func(choice int, d openaiwire.Delta, finish *string, logprobs json.RawMessage) *openaiwire.ChatCompletionChunk {
		chat.Choices[0] = openaiwire.ChunkChoice{Index: choice, Delta: d, FinishReason: finish, Logprobs: logprobs}
		return &chat
	}
	started := 1 // choices whose first (role) delta was sent
	text := openaiwire.Completion{ID: c.id, Object: "text_completion", Created: created, Model: model,
		Choices: make([]openaiwire.CompletionChoice, 1)}
	textChunk := func(choice int, t string, finish *string, logprobs json.RawMessage) *openaiwire.Completion {
		text.Choices[0] = openaiwire.CompletionChoice{Text: t, Index: choice, FinishReason: finish, Logprobs: logprobs}
		return &text
	}
	var content string // the text of the chunk being sent
	if c.chat {
		empty := ""
		if !send(chatChunk(0, openaiwire.Delta{Role: llm.RoleAssistant, Content: &empty}, nil, nil)) {
			return nil
		}
	}
	err := eachChunk(sw, c.st, func(ch llm.Chunk) bool {
		if !ch.HasContent() {
			return true
		}
		if c.chat {
			d := openaiwire.Delta{}
			if ch.Choice >= started {
				d.Role = llm.RoleAssistant
				started = ch.Choice + 1
			}
			if ch.Text != "" {
				content = ch.Text
				d.Content = &content
			}
			for _, tc := range ch.ToolCalls {
				idx := tc.Index
				wtc := openaiwire.ToolCall{Index: &idx, ID: tc.ID, Function: openaiwire.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}}
				if tc.ID != "" {
					wtc.Type = "function"
				}
				d.ToolCalls = append(d.ToolCalls, wtc)
			}
			return send(chatChunk(ch.Choice, d, nil, ch.Logprobs))
		}
		return send(textChunk(ch.Choice, ch.Text, nil, ch.Logprobs))
	})
	switch {
	case err == errClientGone:
		return nil // Close cancels the upstream and records what was used
	case err != nil:
		c.s.streamFailed(c.ctx, err)
		send(openaiwire.ErrorResponse{Error: openAIErrorBody(classify(err))})
		return nil
	}
	res := c.st.Result()
	if res.Output.Failed() {
		// Everything was sent already: say so instead of finishing.
		send(openaiwire.ErrorResponse{Error: openAIErrorBody(classify(c.s.llm.OutputError(res)))})
		return nil
	}
	finish := res.FinishReason
	if c.chat {
		send(chatChunk(0, openaiwire.Delta{}, &finish, nil))
		for i, ch := range res.More {
			f := ch.FinishReason
			send(chatChunk(i+1, openaiwire.Delta{}, &f, nil))
		}
	} else {
		send(textChunk(0, "", &finish, nil))
		for i, ch := range res.More {
			f := ch.FinishReason
			send(textChunk(i+1, "", &f, nil))
		}
	}
	if c.includeUsage {
		if c.chat {
			send(&openaiwire.ChatCompletionChunk{ID: c.id, Object: "chat.completion.chunk", Created: created, Model: model,
				Choices: []openaiwire.ChunkChoice{}, Usage: compatUsage(res.Usage)})
		} else {
			send(&openaiwire.Completion{ID: c.id, Object: "text_completion", Created: created, Model: model,
				Choices: []openaiwire.CompletionChoice{}, Usage: compatUsage(res.Usage)})
		}
	}
	sw.write(doneEvent)
	return nil
}

// doneEvent ends an OpenAI stream.
var doneEvent = []byte("data: [DONE]\n\n")

// openAIErrorBody maps an error to OpenAI's error object.
func openAIErrorBody(e *errs.Error) openaiwire.ErrorBody {
	typ, code := "api_error", string(e.Kind)
	switch e.Kind {
	case errs.Invalid, errs.Validation, errs.TooLarge, errs.UnsupportedMedia, errs.MethodNotAllowed, errs.Conflict:
		typ = "invalid_request_error"
	case errs.Unauthenticated:
		typ, code = "authentication_error", "invalid_api_key"
	case errs.Forbidden:
		typ = "permission_error"
		if _, ok := e.Details["allowedModels"]; ok {
			code = "model_not_allowed"
		}
	case errs.NotFound:
		typ = "invalid_request_error"
		if _, ok := e.Details["model"]; ok {
			code = "model_not_found"
		}
	case errs.RateLimited:
		typ, code = "rate_limit_error", "rate_limit_exceeded"
	case errs.BudgetExceeded:
		// OpenAI's type for an exhausted quota; the code stays ours.
		typ = "insufficient_quota"
	case errs.UpstreamTimeout:
		typ = "timeout_error"
	}
	body := openaiwire.ErrorBody{Message: e.Message, Type: typ, Code: &code}
	if param, ok := e.Details["param"].(string); ok {
		body.Param = &param
	} else if ps, ok := e.Details["problems"].([]errs.Problem); ok && len(ps) > 0 {
		param := snakeCase(ps[0].Field)
		body.Param = &param
		if e.Kind == errs.Validation {
			msgs := make([]string, len(ps))
			for i, p := range ps {
				msgs[i] = snakeCase(p.Field) + " " + p.Problem
			}
			body.Message = e.Message + ": " + strings.Join(msgs, "; ")
		}
	} else if _, ok := e.Details["model"].(string); ok && (e.Kind == errs.NotFound || e.Kind == errs.Forbidden) {
		param := "model"
		body.Param = &param
	}
	return body
}

// writeOpenAIError is the error writer of the /openai/ routes: OpenAI's
// shape, and 400 (not 422) for invalid parameters, as OpenAI answers.
func writeOpenAIError(c echo.Context, status int, e *errs.Error) {
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	_ = c.JSON(status, openaiwire.ErrorResponse{Error: openAIErrorBody(e)})
}

// snakeCase turns the camelCase parts of a field path into OpenAI's
// snake_case (maxTokens -> max_tokens, text -> input).
func snakeCase(field string) string {
	if field == "text" {
		return "input"
	}
	var b strings.Builder
	for i := 0; i < len(field); i++ {
		ch := field[i]
		if ch >= 'A' && ch <= 'Z' {
			if i > 0 && field[i-1] != '.' {
				b.WriteByte('_')
			}
			b.WriteByte(ch + 'a' - 'A')
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}
