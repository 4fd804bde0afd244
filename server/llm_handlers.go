package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// discoveryInterval is how often providers with discover: true are listed again.
const discoveryInterval = 10 * time.Minute

// initLLM builds the model catalog, the gateway and the usage recorder,
// and registers their shutdown hooks and the OpenAI error shape.
func (s *Server) initLLM(resolver egress.Resolver) error {
	cat, err := llm.NewCatalog(context.Background(), s.cfg.Providers, llm.CatalogOptions{Store: s.store, Logger: s.log, Events: s.eventQueue})
	if err != nil {
		return err
	}
	s.usage = usage.New(s.store, usage.Options{Logger: s.log})
	s.closers = append(s.closers, s.usage.Close)
	s.closers = append(s.closers, cat.StartDiscovery(discoveryInterval))
	// Image URLs a provider needs as bytes are fetched through the egress
	// guard, with the operator's egress.allow.
	images, err := s.egressGuard(resolver)
	if err != nil {
		return err
	}
	s.llm = &llm.Gateway{Catalog: cat, Usage: s.usage, Log: s.log,
		Events: s.eventQueue, Subscribed: s.webhooks.Subscribed, Breakers: llm.NewBreakers(s.cfg.Providers),
		Images: llm.NewImageFetcher(images)}
	if s.errorWriters == nil {
		s.errorWriters = map[string]errorWriter{}
	}
	s.errorWriters["/openai/"] = writeOpenAIError
	s.errorWriters[anthropicPrefix] = writeAnthropicError
	return nil
}

// LLM returns the language-model gateway (tests, rate limits, metrics).
func (s *Server) LLM() *llm.Gateway { return s.llm }

// Usage returns the usage recorder (GET /v1/usage, tests).
func (s *Server) Usage() *usage.Recorder { return s.usage }

func nativeMessages(in []api.Message) []llm.Message {
	out := make([]llm.Message, len(in))
	for i, m := range in {
		out[i] = llm.Message{Role: string(m.Role), Content: m.Content}
	}
	return out
}

func createdAt(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

func generation(id string, res *llm.Result) api.Generation {
	return api.Generation{
		Id: id, Text: res.Text, Model: res.Model.ID,
		PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens, TotalTokens: res.Usage.Total(),
		CreatedAt: createdAt(res.CreatedAt),
	}
}

func chatCompletion(id string, res *llm.Result) api.ChatCompletion {
	return api.ChatCompletion{
		Id: id, Message: api.Message{Role: api.MessageRoleAssistant, Content: res.Text}, Model: res.Model.ID,
		PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens, TotalTokens: res.Usage.Total(),
		CreatedAt: createdAt(res.CreatedAt),
	}
}

// nativeResponseFormat translates responseFormat (nil for none).
func nativeResponseFormat(f *api.ResponseFormat) *llm.ResponseFormat {
	if f == nil {
		return nil
	}
	rf := &llm.ResponseFormat{Type: string(f.Type)}
	if f.Name != nil {
		rf.Name = *f.Name
	}
	if f.Description != nil {
		rf.Description = *f.Description
	}
	if f.Schema != nil {
		rf.Schema = *f.Schema
	}
	rf.Strict = f.Strict != nil && *f.Strict
	if rf.Type == llm.FormatText {
		return nil
	}
	return rf
}

func (h *handlers) Generate(ctx context.Context, req api.GenerateRequestObject) (api.GenerateResponseObject, error) {
	b := req.Body
	r := &llm.Request{Model: b.Model, Prompt: b.Prompt, MaxTokens: b.MaxTokens, Temperature: b.Temperature, TopP: b.TopP,
		FrequencyPenalty: b.FrequencyPenalty, PresencePenalty: b.PresencePenalty, ResponseFormat: nativeResponseFormat(b.ResponseFormat)}
	id := llm.NewID("gen_")
	if b.Stream != nil && *b.Stream {
		st, err := h.s.llm.Stream(ctx, llm.OpGenerate, r)
		if err != nil {
			return nil, err
		}
		return &nativeStream{s: h.s, ctx: ctx, st: st, done: func(res *llm.Result) any { return generation(id, res) }}, nil
	}
	res, err := h.s.llm.Complete(ctx, llm.OpGenerate, r)
	if err != nil {
		return nil, err
	}
	g := generation(id, res)
	return &jsonOK{v: &g, header: outputHeader(res.Output)}, nil
}

func (h *handlers) Chat(ctx context.Context, req api.ChatRequestObject) (api.ChatResponseObject, error) {
	b := req.Body
	r := &llm.Request{Model: b.Model, Messages: nativeMessages(b.Messages), MaxTokens: b.MaxTokens, Temperature: b.Temperature,
		TopP: b.TopP, FrequencyPenalty: b.FrequencyPenalty, PresencePenalty: b.PresencePenalty, ResponseFormat: nativeResponseFormat(b.ResponseFormat)}
	id := llm.NewID("chat_")
	if f := (loopFields{actions: b.Actions, toolset: b.Toolset, execute: b.Execute, maxSteps: b.MaxSteps, connection: connectionHeader(ctx)}); f.wanted() {
		return h.chatLoop(ctx, f, r, id, b.Stream != nil && *b.Stream)
	}
	if b.Stream != nil && *b.Stream {
		st, err := h.s.llm.Stream(ctx, llm.OpChat, r)
		if err != nil {
			return nil, err
		}
		return &nativeStream{s: h.s, ctx: ctx, st: st, done: func(res *llm.Result) any { return chatCompletion(id, res) }}, nil
	}
	res, err := h.s.llm.Complete(ctx, llm.OpChat, r)
	if err != nil {
		return nil, err
	}
	cc := chatCompletion(id, res)
	return &jsonOK{v: &cc, header: outputHeader(res.Output)}, nil
}

func (h *handlers) CreateEmbedding(ctx context.Context, req api.CreateEmbeddingRequestObject) (api.CreateEmbeddingResponseObject, error) {
	var inputs []string
	if req.Body.Text != "" {
		inputs = []string{req.Body.Text}
	}
	res, err := h.s.llm.Embed(ctx, req.Body.Model, llm.EmbedRequest{Inputs: inputs}, "text")
	if err != nil {
		return nil, err
	}
	return &jsonOK{v: &api.Embedding{
		Id: llm.NewID("emb_"), Embedding: res.Vectors[0], Model: res.Model.ID, Tokens: res.Usage.PromptTokens,
		CreatedAt: createdAt(res.CreatedAt),
	}}, nil
}

func (h *handlers) CallFunction(ctx context.Context, req api.CallFunctionRequestObject) (api.CallFunctionResponseObject, error) {
	b := req.Body
	r := &llm.Request{Model: b.Model, Messages: nativeMessages(b.Messages), Temperature: b.Temperature}
	fns := make([]llm.FunctionDef, len(b.Functions))
	for i, f := range b.Functions {
		fns[i] = llm.FunctionDef{Name: f.Name}
		if f.Description != nil {
			fns[i].Description = *f.Description
		}
		if f.Parameters != nil {
			raw, err := json.Marshal(*f.Parameters)
			if err != nil {
				return nil, errs.Wrap(errs.Invalid, err, "functions: parameters is not a JSON object")
			}
			fns[i].Parameters = raw
		}
	}
	if f := (loopFields{actions: b.Actions, toolset: b.Toolset, execute: b.Execute, maxSteps: b.MaxSteps, connection: connectionHeader(ctx)}); f.wanted() {
		return h.functionLoop(ctx, f, r, fns)
	}
	res, err := h.s.llm.CallFunction(ctx, r, fns)
	if err != nil {
		return nil, err
	}
	out := functionCallResult(res)
	return &jsonOK{v: &out}, nil
}

// functionCallResult is the wire form of res.
func functionCallResult(res *llm.FunctionResult) api.FunctionCallResult {
	out := api.FunctionCallResult{
		Id: llm.NewID("fc_"), Model: res.Model.ID,
		PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens, TotalTokens: res.Usage.Total(),
		CreatedAt: createdAt(res.CreatedAt), ArgumentsProblems: []api.Problem{},
	}
	if res.Text != "" || res.Call == nil {
		out.Message = &api.Message{Role: api.MessageRoleAssistant, Content: res.Text}
	}
	if res.Call != nil {
		args := res.Call.Arguments
		if args == nil {
			args = map[string]any{}
		}
		out.FunctionCall = &api.FunctionCall{Name: res.Call.Name, Arguments: args}
		valid := res.Valid
		out.ArgumentsValid = &valid
		for _, p := range res.Problems {
			out.ArgumentsProblems = append(out.ArgumentsProblems, api.Problem{Field: p.Field, Problem: p.Problem})
		}
	}
	return out
}

func apiModel(m *llm.Model) api.Model {
	out := api.Model{Id: m.ID, Provider: m.Provider, Name: m.Name, Capabilities: slices.Clone(m.Capabilities)}
	if m.MaxTokens > 0 && !m.Has(llm.CapEmbeddings) {
		v := m.MaxTokens
		out.MaxTokens = &v
	}
	if v := m.EmbeddingDimensions(); v > 0 && m.Has(llm.CapEmbeddings) {
		out.Dimensions = &v
	}
	return out
}

func apiModelDetail(m *llm.Model) api.ModelDetail {
	b := apiModel(m)
	out := api.ModelDetail{Id: b.Id, Provider: b.Provider, Name: b.Name, Capabilities: b.Capabilities,
		MaxTokens: b.MaxTokens, Dimensions: b.Dimensions, CreatedAt: createdAt(m.CreatedAt)}
	if m.Pricing != nil {
		out.Pricing = &api.Pricing{Input: m.Pricing.Input, Output: m.Pricing.Output, CachedInput: m.Pricing.CachedInput}
	}
	return out
}

func (h *handlers) ListModels(ctx context.Context, req api.ListModelsRequestObject) (api.ListModelsResponseObject, error) {
	p := req.Params
	if p.Limit != nil && (*p.Limit < 1 || *p.Limit > 1000) {
		return nil, errs.Problems("invalid query", []errs.Problem{{Field: "limit", Problem: "must be between 1 and 1000"}})
	}
	var f llm.Filter
	if p.Provider != nil {
		f.Provider = *p.Provider
	}
	if p.Capability != nil {
		f.Capability = string(*p.Capability)
	}
	models, err := h.s.llm.Catalog.List(f)
	if err != nil {
		return nil, err
	}
	models = llm.Allowed(ctx, models)
	out := api.ListModels200JSONResponse{Data: []api.Model{}}
	for _, m := range models {
		if p.Cursor != nil && *p.Cursor != "" && m.ID <= *p.Cursor {
			continue
		}
		if p.Limit != nil && len(out.Data) == *p.Limit {
			next := out.Data[len(out.Data)-1].Id
			out.NextCursor = &next
			break
		}
		out.Data = append(out.Data, apiModel(m))
	}
	return out, nil
}

func (h *handlers) GetModel(ctx context.Context, req api.GetModelRequestObject) (api.GetModelResponseObject, error) {
	m, err := h.s.llm.Model(ctx, req.Id, false)
	if err != nil {
		return nil, err
	}
	return api.GetModel200JSONResponse(apiModelDetail(m)), nil
}

func (h *handlers) GetProviderModel(ctx context.Context, req api.GetProviderModelRequestObject) (api.GetProviderModelResponseObject, error) {
	m, err := h.s.llm.Model(ctx, req.Provider+"/"+req.Name, false)
	if err != nil {
		return nil, err
	}
	return api.GetProviderModel200JSONResponse(apiModelDetail(m)), nil
}

// jsonOK answers 200 with v encoded as JSON. The LLM routes encode with
// github.com/goccy/go-json, a drop-in encoding/json several times faster on
// these small bodies (it is on every request's path).
type jsonOK struct {
	v any
	// header holds extra response headers (nil for none).
	header http.Header
}

func (o *jsonOK) write(w http.ResponseWriter) error {
	for k, v := range o.header {
		w.Header()[k] = v
	}
	w.Header()["Content-Type"] = contentTypeJSON
	// The encoder writes only once v is encoded whole (its first Write
	// sends the 200), so that an encoding failure still becomes a 500.
	return fastjson.NewEncoder(w).Encode(o.v)
}

// OutputCheckHeader tells the caller whether a structured output (a
// response format of json_object or json_schema) conforms: "valid", or
// "invalid; " and what is wrong. A strict json_schema that the output
// does not meet is a 502 instead.
const OutputCheckHeader = "Switchboard-Output-Check"

// outputHeader is the header reporting c (nil when nothing was checked).
func outputHeader(c *llm.OutputCheck) http.Header {
	if c == nil {
		return nil
	}
	if c.Valid() {
		return http.Header{OutputCheckHeader: {"valid"}}
	}
	problem := strings.Join(strings.Fields(strings.Join(c.Problems, "; ")), " ")
	if len(problem) > 300 {
		problem = problem[:300] + "..."
	}
	return http.Header{OutputCheckHeader: {"invalid; " + problem}}
}

// contentTypeJSON is shared by every response; net/http never modifies it.
var contentTypeJSON = []string{"application/json"}

func (o *jsonOK) VisitGenerateResponse(w http.ResponseWriter) error        { return o.write(w) }
func (o *jsonOK) VisitChatResponse(w http.ResponseWriter) error            { return o.write(w) }
func (o *jsonOK) VisitCreateEmbeddingResponse(w http.ResponseWriter) error { return o.write(w) }
func (o *jsonOK) VisitCallFunctionResponse(w http.ResponseWriter) error    { return o.write(w) }

// streamDelta is the data of an `event: delta` (StreamDelta in the spec).
type streamDelta struct {
	Text string `json:"text"`
}

// nativeStream writes a generate or chat stream as server-sent events:
// `delta` events with {"text"}, then `done` with the full object, or
// `error` with an ErrorResponse when the upstream fails mid-stream.
type nativeStream struct {
	s    *Server
	ctx  context.Context
	st   *llm.ResultStream
	done func(*llm.Result) any
}

func (n *nativeStream) VisitGenerateResponse(w http.ResponseWriter) error { return n.write(w) }
func (n *nativeStream) VisitChatResponse(w http.ResponseWriter) error     { return n.write(w) }

// sseWriter writes a stream's server-sent events. What it writes is
// buffered and leaves when flushed (eachChunk flushes after each upstream
// chunk with content), so that the events one chunk produces share one
// write to the caller instead of taking one each. The headers and the
// opening events leave with the first chunk's, or after firstFlush if the
// upstream is slower; the closing events leave with the end of the body,
// when the handler returns.
type sseWriter struct {
	w       http.ResponseWriter
	flusher *http.ResponseController
	buf     eventBuffer       // the event being encoded
	enc     *fastjson.Encoder // encodes into buf
	pending bool              // written and not yet flushed
	failed  bool              // a write or a flush failed: the caller went away
}

// eventBuffer is an io.Writer appending to itself: an encoder's output.
type eventBuffer []byte

// Write implements io.Writer.
func (b *eventBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// firstFlush is how long the headers and the first events may wait for
// the upstream's first chunk to leave with them.
const firstFlush = 100 * time.Millisecond

// startSSE sets the event-stream headers; they leave with the first flush.
func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	inner := w
	if r, ok := w.(*echo.Response); ok {
		inner = r.Writer // echo's Flush does not report a failed write
	}
	sw := &sseWriter{w: w, flusher: http.NewResponseController(inner), pending: true}
	sw.enc = fastjson.NewEncoder(&sw.buf)
	return sw
}

// event writes the event name (none when "") with v as its JSON data;
// false when the caller went away.
func (s *sseWriter) event(name string, v any) bool {
	s.buf = s.buf[:0]
	if name != "" {
		s.buf = append(s.buf, "event: "...)
		s.buf = append(s.buf, name...)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "data: "...)
	// Compact JSON, which the encoder writes (raw values included), has no
	// line breaks: it is one data line.
	if err := s.enc.Encode(v); err != nil { // the JSON, then a newline
		return false
	}
	s.buf = append(s.buf, '\n')
	return s.write(s.buf)
}

// write writes b, an encoded event; false when the caller went away.
func (s *sseWriter) write(b []byte) bool {
	if s.failed {
		return false
	}
	if _, err := s.w.Write(b); err != nil {
		s.failed = true
		return false
	}
	s.pending = true
	return true
}

// flush sends what was written; false when the caller went away.
func (s *sseWriter) flush() bool {
	if s.failed {
		return false
	}
	if !s.pending {
		return true
	}
	s.pending = false
	if err := s.flusher.Flush(); err != nil {
		s.failed = true
		return false
	}
	return true
}

// keepAliveComment is an SSE comment: clients ignore it, proxies see traffic.
var keepAliveComment = []byte(": keep-alive\n\n")

// eachChunk calls fn for every chunk of st, sending a keep-alive comment
// whenever the upstream stays silent for st.KeepAlive(). It returns nil at
// the end of the stream, the stream's error, or errClientGone when a write
// to the caller failed (the caller went away).
func eachChunk(sw *sseWriter, st *llm.ResultStream, fn func(llm.Chunk) bool) error {
	return eachChunkKeepAlive(sw, st, keepAliveComment, fn)
}

// eachChunkKeepAlive is eachChunk sending keepAlive (a wire format's own
// keep-alive event, such as Anthropic's ping) instead of the comment.
//
// It reads the upstream on the handler's goroutine and flushes sw after
// each chunk with content (text, tool calls or logprobs). The keep-alive
// is a timer that fires only when the caller got nothing for the whole
// interval (a chunk does not reset it, it moves the time it is due), so a
// stream costs no goroutine and no timer operation per chunk; its first
// firing, after firstFlush, sends what the stream wrote before its first
// chunk with content. Writes to sw are serialised by mu; a keep-alive that
// cannot be written aborts the upstream read, so that the handler sees
// the caller went away.
func eachChunkKeepAlive(sw *sseWriter, st *llm.ResultStream, keepAlive []byte, fn func(llm.Chunk) bool) error {
	every := st.KeepAlive()
	var (
		mu    sync.Mutex
		last  = time.Now() // when the caller last got something (flushed)
		ended bool         // the handler is done with sw
		gone  bool         // a keep-alive could not be written
		timer *time.Timer
	)
	timer = time.AfterFunc(min(firstFlush, every), func() {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		if !sw.pending {
			if wait := every - time.Since(last); wait > 0 {
				timer.Reset(wait)
				return
			}
			sw.write(keepAlive)
		}
		if !sw.flush() {
			gone = true
			st.Cancel()
			return
		}
		last = time.Now()
		timer.Reset(every)
	})
	defer func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		timer.Stop()
	}()
	for {
		c, err := st.Next()
		mu.Lock()
		switch {
		case gone:
			err = errClientGone
		case err == nil:
			switch {
			case !fn(c):
				err = errClientGone
			case !sw.pending:
			case !c.HasContent():
				// What a chunk without content opened (Anthropic's
				// message_start) leaves with the next chunk's events, or
				// after firstFlush.
				timer.Reset(firstFlush)
			case !sw.flush():
				err = errClientGone
			default:
				last = time.Now()
			}
		case err == io.EOF:
			mu.Unlock()
			return nil
		}
		mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// errClientGone ends a stream whose caller went away.
var errClientGone = errors.New("the client went away")

func (n *nativeStream) write(w http.ResponseWriter) error {
	defer n.st.Close()
	sw := startSSE(w)
	err := eachChunk(sw, n.st, nativeDeltas(sw))
	switch {
	case err == errClientGone:
		return nil // Close cancels the upstream and records what was used
	case err != nil:
		n.s.streamFailed(n.ctx, err)
		sw.nativeError(n.ctx, classify(err))
		return nil
	}
	res := n.st.Result()
	if res.Output.Failed() {
		sw.nativeError(n.ctx, classify(n.s.llm.OutputError(res)))
		return nil
	}
	sw.event("done", n.done(res))
	return nil
}

// nativeDeltas is eachChunk's fn for the native routes: a "delta" event
// for each chunk with text, one value reused for all (each event is
// encoded when it is filled in).
func nativeDeltas(sw *sseWriter) func(llm.Chunk) bool {
	var delta streamDelta
	return func(c llm.Chunk) bool {
		if c.Text == "" {
			return true
		}
		delta.Text = c.Text
		return sw.event("delta", &delta)
	}
}

// nativeError writes the native routes' "error" event for e.
func (s *sseWriter) nativeError(ctx context.Context, e *errs.Error) {
	data, _ := json.Marshal(nativeError(ctx, e))
	s.write(llm.AppendEvent(nil, "error", data))
}

// streamFailed logs a stream that failed after its 200 was sent (the
// request log line cannot show it).
func (s *Server) streamFailed(ctx context.Context, err error) {
	if errors.Is(err, llm.ErrClientGone) || ctx.Err() != nil {
		return
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "llm stream failed", slog.String("requestId", requestid.From(ctx)),
		slog.String("code", string(errs.KindOf(err))), slog.String("error", strings.TrimSpace(err.Error())))
}
