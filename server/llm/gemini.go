package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// geminiProvider speaks the Gemini API (generativelanguage.googleapis.com):
// generateContent, streamGenerateContent?alt=sse, embedContent /
// batchEmbedContents, functionDeclarations and the model list.
//
// Request fields beyond the basics map to Gemini's own:
//   - images: inline_data {mime_type, data} parts (the gateway fetches
//     https URLs for Gemini, see images.go);
//   - response_format json_object: generationConfig.responseMimeType
//     "application/json"; json_schema: the same plus responseJsonSchema
//     (Gemini's JSON Schema field, which it enforces);
//   - n: candidateCount, every candidate read back (Response.More,
//     Chunk.Choice);
//   - reasoning_effort: thinkingConfig.thinkingLevel (minimal, low,
//     medium, high) for Gemini 3 models, thinkingBudget for earlier ones
//     (geminiThinkingBudgets);
//   - tools[].function.strict: functionCallingConfig mode VALIDATED (calls
//     conform to the declared schema) when the choice is auto;
//   - logprobs / top_logprobs (passthrough): responseLogprobs / logprobs,
//     the candidate's logprobsResult read back in OpenAI's logprobs shape.
//
// Unsupported names the rest (other passthrough fields, images in system
// messages), so that the gateway refuses them rather than drop them.
type geminiProvider struct{ up upstream }

var (
	_ Provider     = (*geminiProvider)(nil)
	_ FieldChecker = (*geminiProvider)(nil)
)

func newGemini(up upstream) *geminiProvider {
	key := up.secret
	up.setAuth = func(h http.Header) {
		if key != "" {
			h.Set("x-goog-api-key", key)
		}
	}
	up.errorMessage = jsonErrorMessage
	return &geminiProvider{up: up}
}

type gemRequest struct {
	Contents          []gemContent  `json:"contents"`
	SystemInstruction *gemContent   `json:"systemInstruction,omitempty"`
	GenerationConfig  *gemGenConfig `json:"generationConfig,omitempty"`
	Tools             []gemTool     `json:"tools,omitempty"`
	ToolConfig        *gemToolCfg   `json:"toolConfig,omitempty"`
}

type gemContent struct {
	Role  string    `json:"role,omitempty"`
	Parts []gemPart `json:"parts"`
}

type gemPart struct {
	Text             string           `json:"text,omitempty"`
	Thought          bool             `json:"thought,omitempty"`
	InlineData       *gemBlob         `json:"inline_data,omitempty"`
	FunctionCall     *gemFunctionCall `json:"functionCall,omitempty"`
	FunctionResponse *gemFunctionResp `json:"functionResponse,omitempty"`
}

// gemBlob is inline data: its media type and its bytes (base64 on the wire).
type gemBlob struct {
	MimeType string `json:"mime_type"`
	Data     []byte `json:"data"`
}

type gemFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type gemFunctionResp struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type gemGenConfig struct {
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	MaxOutputTokens    *int            `json:"maxOutputTokens,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	CandidateCount     int             `json:"candidateCount,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ResponseLogprobs   bool            `json:"responseLogprobs,omitempty"`
	Logprobs           *int            `json:"logprobs,omitempty"`
	ThinkingConfig     *gemThinking    `json:"thinkingConfig,omitempty"`
}

// empty reports whether c sets nothing (and is left out of the request).
func (c *gemGenConfig) empty() bool {
	return c.Temperature == nil && c.TopP == nil && c.MaxOutputTokens == nil && len(c.StopSequences) == 0 &&
		c.PresencePenalty == nil && c.FrequencyPenalty == nil && c.Seed == nil && c.CandidateCount == 0 &&
		c.ResponseMimeType == "" && !c.ResponseLogprobs && c.Logprobs == nil && c.ThinkingConfig == nil
}

// gemThinking is thinkingConfig: a level (Gemini 3) or a token budget
// (Gemini 2.5), never both.
type gemThinking struct {
	ThinkingLevel  string `json:"thinkingLevel,omitempty"`
	ThinkingBudget *int   `json:"thinkingBudget,omitempty"`
}

// geminiThinkingBudgets are the thinkingBudget of each reasoning effort
// for models before Gemini 3 (within every 2.5 model's range: Pro
// 128-32768, Flash 0-24576, Flash-Lite 512-24576).
var geminiThinkingBudgets = map[string]int{EffortMinimal: 512, EffortLow: 1024, EffortMedium: 8192, EffortHigh: 24576}

// geminiThinking maps a reasoning effort for model name: thinkingLevel
// for Gemini 3 and later, thinkingBudget before.
func geminiThinking(name, effort string) *gemThinking {
	if effort == "" {
		return nil
	}
	n := strings.TrimPrefix(name, "models/")
	if strings.HasPrefix(n, "gemini-") && !strings.HasPrefix(n, "gemini-1") && !strings.HasPrefix(n, "gemini-2") {
		return &gemThinking{ThinkingLevel: effort}
	}
	b, ok := geminiThinkingBudgets[effort]
	if !ok {
		return nil
	}
	return &gemThinking{ThinkingBudget: &b}
}

type gemTool struct {
	FunctionDeclarations []gemFunctionDecl `json:"functionDeclarations"`
}

type gemFunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type gemToolCfg struct {
	FunctionCallingConfig gemFCConfig `json:"functionCallingConfig"`
}

type gemFCConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type gemResponse struct {
	Candidates     []gemCandidate `json:"candidates"`
	UsageMetadata  *gemUsage      `json:"usageMetadata"`
	ResponseID     string         `json:"responseId"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	Error json.RawMessage `json:"error"`
}

type gemCandidate struct {
	Content        gemContent         `json:"content"`
	FinishReason   string             `json:"finishReason"`
	Index          int                `json:"index"`
	LogprobsResult *gemLogprobsResult `json:"logprobsResult"`
}

// gemLogprobsResult is a candidate's logprobsResult: per output token the
// chosen token and the top alternatives.
type gemLogprobsResult struct {
	TopCandidates []struct {
		Candidates []gemLogprob `json:"candidates"`
	} `json:"topCandidates"`
	ChosenCandidates []gemLogprob `json:"chosenCandidates"`
}

type gemLogprob struct {
	Token          string  `json:"token"`
	LogProbability float64 `json:"logProbability"`
}

// openAILogprob is one token of OpenAI's logprobs.content, and
// openAITopLogprob one of its alternatives.
type openAILogprob struct {
	openAITopLogprob
	TopLogprobs []openAITopLogprob `json:"top_logprobs"`
}

type openAITopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func openAITop(c gemLogprob) openAITopLogprob {
	bs := make([]int, len(c.Token))
	for i := 0; i < len(c.Token); i++ {
		bs[i] = int(c.Token[i])
	}
	return openAITopLogprob{Token: c.Token, Logprob: c.LogProbability, Bytes: bs}
}

// openAI converts a logprobsResult to OpenAI's logprobs object
// ({"content":[...],"refusal":null}); nil for none.
func (l *gemLogprobsResult) openAI() json.RawMessage {
	if l == nil || len(l.ChosenCandidates) == 0 {
		return nil
	}
	content := make([]openAILogprob, len(l.ChosenCandidates))
	for i, c := range l.ChosenCandidates {
		content[i] = openAILogprob{openAITopLogprob: openAITop(c), TopLogprobs: []openAITopLogprob{}}
		if i < len(l.TopCandidates) {
			for _, alt := range l.TopCandidates[i].Candidates {
				content[i].TopLogprobs = append(content[i].TopLogprobs, openAITop(alt))
			}
		}
	}
	b, err := json.Marshal(map[string]any{"content": content, "refusal": nil})
	if err != nil {
		return nil
	}
	return b
}

// gemUsage is usageMetadata; promptTokenCount includes the
// cachedContentTokenCount served from a context cache.
type gemUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

func (u *gemUsage) usage() *Usage {
	if u == nil {
		return nil
	}
	return &Usage{PromptTokens: u.PromptTokenCount, CachedPromptTokens: u.CachedContentTokenCount, CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount}
}

// modelPath is /models/<name> with the name escaped.
func geminiModelPath(name string) string {
	return "/models/" + url.PathEscape(strings.TrimPrefix(name, "models/"))
}

func (p *geminiProvider) request(m *Model, r *Request) *gemRequest {
	w := &gemRequest{}
	gc := &gemGenConfig{Temperature: r.Temperature, TopP: r.TopP, MaxOutputTokens: r.MaxTokens, StopSequences: r.Stop,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty, Seed: r.Seed,
		ThinkingConfig: geminiThinking(m.Name, r.ReasoningEffort)}
	if r.N > 1 {
		gc.CandidateCount = r.N
	}
	if f := r.ResponseFormat; f != nil {
		switch f.Type {
		case FormatJSONObject:
			gc.ResponseMimeType = "application/json"
		case FormatJSONSchema:
			gc.ResponseMimeType, gc.ResponseJSONSchema = "application/json", f.Schema
		}
	}
	if v, ok := r.Passthrough["logprobs"]; ok {
		_ = json.Unmarshal(v, &gc.ResponseLogprobs)
	}
	if v, ok := r.Passthrough["top_logprobs"]; ok {
		var n int
		if json.Unmarshal(v, &n) == nil {
			gc.Logprobs = &n
		}
	}
	if !gc.empty() {
		w.GenerationConfig = gc
	}
	msgs := r.Messages
	if len(msgs) == 0 {
		msgs = []Message{{Role: RoleUser, Content: r.Prompt}}
	}
	callNames := map[string]string{} // tool call id -> function name
	var system []gemPart
	for _, msg := range msgs {
		var (
			role  string
			parts []gemPart
		)
		switch msg.Role {
		case RoleSystem:
			if msg.Content != "" {
				system = append(system, gemPart{Text: msg.Content})
			}
			continue
		case RoleAssistant:
			role = "model"
			switch {
			case msg.hasImages():
				parts = geminiParts(msg)
			case msg.Content != "":
				parts = append(parts, gemPart{Text: msg.Content})
			}
			for _, tc := range msg.ToolCalls {
				callNames[tc.ID] = tc.Name
				parts = append(parts, gemPart{FunctionCall: &gemFunctionCall{Name: tc.Name, Args: argumentsObject(tc.Arguments)}})
			}
		case RoleTool:
			role = "user"
			name := msg.Name
			if name == "" {
				name = callNames[msg.ToolCallID]
			}
			parts = []gemPart{{FunctionResponse: &gemFunctionResp{Name: name, Response: toolResultObject(msg.Content)}}}
			parts = append(parts, geminiImages(msg)...)
		default:
			role = "user"
			switch {
			case msg.hasImages():
				parts = geminiParts(msg)
			case msg.Content != "":
				parts = []gemPart{{Text: msg.Content}}
			}
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(w.Contents); n > 0 && w.Contents[n-1].Role == role {
			w.Contents[n-1].Parts = append(w.Contents[n-1].Parts, parts...)
			continue
		}
		w.Contents = append(w.Contents, gemContent{Role: role, Parts: parts})
	}
	if len(system) > 0 {
		w.SystemInstruction = &gemContent{Parts: system}
	}
	if len(r.Tools) > 0 {
		decls := make([]gemFunctionDecl, len(r.Tools))
		for i, t := range r.Tools {
			decls[i] = gemFunctionDecl{Name: t.Name, Description: t.Description, Parameters: geminiSchema(t.Parameters)}
		}
		w.Tools = []gemTool{{FunctionDeclarations: decls}}
		if tc := r.ToolChoice; tc != nil {
			switch tc.Mode {
			case ToolChoiceAuto:
				w.ToolConfig = &gemToolCfg{FunctionCallingConfig: gemFCConfig{Mode: "AUTO"}}
			case ToolChoiceNone:
				w.ToolConfig = &gemToolCfg{FunctionCallingConfig: gemFCConfig{Mode: "NONE"}}
			case ToolChoiceRequired:
				w.ToolConfig = &gemToolCfg{FunctionCallingConfig: gemFCConfig{Mode: "ANY"}}
			case ToolChoiceFunction:
				w.ToolConfig = &gemToolCfg{FunctionCallingConfig: gemFCConfig{Mode: "ANY", AllowedFunctionNames: []string{tc.Name}}}
			}
		}
		if strictTools(r.Tools) && (w.ToolConfig == nil || w.ToolConfig.FunctionCallingConfig.Mode == "AUTO") {
			// VALIDATED: the model may answer in text, and its calls
			// conform to the declared schemas.
			w.ToolConfig = &gemToolCfg{FunctionCallingConfig: gemFCConfig{Mode: "VALIDATED"}}
		}
	}
	return w
}

func strictTools(tools []Tool) bool {
	for _, t := range tools {
		if t.Strict {
			return true
		}
	}
	return false
}

// geminiParts is a message's content parts in order: text, and images as
// inline_data.
func geminiParts(msg Message) []gemPart {
	parts := make([]gemPart, 0, len(msg.Parts))
	for _, p := range msg.Parts {
		switch {
		case p.Image != nil:
			parts = append(parts, gemPart{InlineData: &gemBlob{MimeType: p.Image.MediaType, Data: p.Image.Data}})
		case p.Text != "":
			parts = append(parts, gemPart{Text: p.Text})
		}
	}
	return parts
}

// geminiImages is a message's images as inline_data parts.
func geminiImages(msg Message) []gemPart {
	var parts []gemPart
	for _, p := range msg.Parts {
		if p.Image != nil {
			parts = append(parts, gemPart{InlineData: &gemBlob{MimeType: p.Image.MediaType, Data: p.Image.Data}})
		}
	}
	return parts
}

// geminiPassthrough are the passthrough fields Gemini carries.
var geminiPassthrough = []string{"logprobs", "top_logprobs"}

// Unsupported implements FieldChecker: every passthrough field but
// logprobs and top_logprobs (Gemini has no logit_bias, service_tier,
// metadata, prediction or store) and an image in a system message
// (Gemini's systemInstruction takes text), in a stable order.
func (p *geminiProvider) Unsupported(m *Model, r *Request) []string {
	var out []string
	for i, msg := range r.Messages {
		for j, part := range msg.Parts {
			if part.Image != nil && msg.Role == RoleSystem {
				out = append(out, fmt.Sprintf("messages[%d].content[%d]", i, j))
			}
		}
	}
	if r.User != "" {
		out = append(out, "user") // Gemini has no end-user id
	}
	var keys []string
	for k := range r.Passthrough {
		if !slices.Contains(geminiPassthrough, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return append(out, keys...)
}

// toolResultObject wraps a tool result as the JSON object Gemini's
// functionResponse.response needs.
func toolResultObject(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{"result": s})
	return b
}

// geminiSchemaKeys are the JSON Schema keywords Gemini's Schema accepts.
var geminiSchemaKeys = []string{"type", "format", "title", "description", "nullable", "enum", "items", "minItems", "maxItems",
	"properties", "required", "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf", "propertyOrdering"}

// geminiSchema converts a JSON Schema to Gemini's OpenAPI-subset Schema:
// upper-case types, ["x","null"] types as nullable, unsupported keywords
// (additionalProperties, $schema, ...) dropped.
func geminiSchema(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, err := json.Marshal(convertGeminiSchema(v))
	if err != nil {
		return raw
	}
	return b
}

func convertGeminiSchema(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, val := range m {
		if !slices.Contains(geminiSchemaKeys, k) {
			continue
		}
		switch k {
		case "type":
			switch t := val.(type) {
			case string:
				out["type"] = strings.ToUpper(t)
			case []any:
				for _, x := range t {
					if s, ok := x.(string); ok {
						if s == "null" {
							out["nullable"] = true
						} else {
							out["type"] = strings.ToUpper(s)
						}
					}
				}
			}
		case "properties":
			if props, ok := val.(map[string]any); ok {
				np := make(map[string]any, len(props))
				for name, ps := range props {
					np[name] = convertGeminiSchema(ps)
				}
				out[k] = np
			}
		case "items":
			out[k] = convertGeminiSchema(val)
		case "anyOf":
			if arr, ok := val.([]any); ok {
				na := make([]any, len(arr))
				for i, x := range arr {
					na[i] = convertGeminiSchema(x)
				}
				out[k] = na
			}
		default:
			out[k] = val
		}
	}
	return out
}

func geminiFinish(reason string, toolCalls bool) string {
	switch reason {
	case "":
		return ""
	case "MAX_TOKENS":
		return FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return FinishContentFilter
	}
	if toolCalls {
		return FinishToolCalls
	}
	return FinishStop
}

// Complete implements Provider.
func (p *geminiProvider) Complete(ctx context.Context, m *Model, r *Request) (*Response, error) {
	var out gemResponse
	if err := p.up.do(ctx, http.MethodPost, geminiModelPath(m.Name)+":generateContent", p.request(m, r), &out); err != nil {
		return nil, err
	}
	resp := &Response{ID: out.ResponseID, Usage: out.UsageMetadata.usage()}
	if len(out.Candidates) == 0 {
		if out.PromptFeedback != nil && out.PromptFeedback.BlockReason != "" {
			resp.FinishReason = FinishContentFilter
			return resp, nil
		}
		return nil, upstreamProtocol(p.up.provider, "sent no candidates")
	}
	cands := out.Candidates
	if len(cands) > 1 {
		slices.SortStableFunc(cands, func(a, b gemCandidate) int { return a.Index - b.Index })
	}
	for i, c := range cands {
		ch := geminiChoice(c)
		if i == 0 {
			resp.Text, resp.ToolCalls, resp.FinishReason, resp.Logprobs = ch.Text, ch.ToolCalls, ch.FinishReason, ch.Logprobs
			continue
		}
		resp.More = append(resp.More, ch)
	}
	return resp, nil
}

// geminiChoice reads a candidate (thoughts left out).
func geminiChoice(c gemCandidate) Choice {
	var (
		ch   Choice
		text strings.Builder
	)
	for i, part := range c.Content.Parts {
		if part.Thought {
			continue
		}
		text.WriteString(part.Text)
		if fc := part.FunctionCall; fc != nil {
			ch.ToolCalls = append(ch.ToolCalls, geminiToolCall(fc, i))
		}
	}
	ch.Text = text.String()
	ch.FinishReason = geminiFinish(c.FinishReason, len(ch.ToolCalls) > 0)
	ch.Logprobs = c.LogprobsResult.openAI()
	return ch
}

func geminiToolCall(fc *gemFunctionCall, n int) ToolCall {
	id := fc.ID
	if id == "" {
		id = "call_" + strconv.Itoa(n)
	}
	args := string(fc.Args)
	if args == "" || args == "null" {
		args = "{}"
	}
	return ToolCall{ID: id, Name: fc.Name, Arguments: args}
}

// Stream implements Provider.
func (p *geminiProvider) Stream(ctx context.Context, m *Model, r *Request) (Stream, error) {
	sb, err := p.up.openStream(ctx, geminiModelPath(m.Name)+":streamGenerateContent?alt=sse", p.request(m, r))
	if err != nil {
		return nil, err
	}
	return &geminiStream{sb: sb}, nil
}

type geminiStream struct {
	sb *streamBody
	// calls counts each candidate's tool calls so far.
	calls map[int]int
	// pending are the chunks of an event with several candidates not
	// returned yet.
	pending []Chunk
}

// Next implements Stream. An event with several candidates (n > 1)
// becomes one chunk per candidate, the first carrying the usage.
func (s *geminiStream) Next() (Chunk, error) {
	for {
		if len(s.pending) > 0 {
			ch := s.pending[0]
			s.pending = s.pending[1:]
			return ch, nil
		}
		ev, err := s.sb.next()
		if err != nil {
			return Chunk{}, err
		}
		if len(ev.Data) == 0 {
			continue
		}
		var out gemResponse
		if err := json.Unmarshal(ev.Data, &out); err != nil {
			return Chunk{}, s.sb.badEvent(err)
		}
		if len(out.Error) > 0 && string(out.Error) != "null" {
			return Chunk{}, streamFailure(s.sb.u.provider, s.sb.u.redact(jsonErrorMessage(ev.Data)))
		}
		usage := out.UsageMetadata.usage()
		if len(out.Candidates) == 0 {
			ch := Chunk{Usage: usage}
			if out.PromptFeedback != nil && out.PromptFeedback.BlockReason != "" {
				ch.FinishReason = FinishContentFilter
			}
			return ch, nil
		}
		for i, c := range out.Candidates {
			ch := s.chunk(c)
			if i == 0 {
				ch.Usage = usage
			}
			s.pending = append(s.pending, ch)
		}
	}
}

// chunk reads one candidate of an event.
func (s *geminiStream) chunk(c gemCandidate) Chunk {
	if s.calls == nil {
		s.calls = map[int]int{}
	}
	ch := Chunk{Choice: c.Index, Logprobs: c.LogprobsResult.openAI()}
	for _, part := range c.Content.Parts {
		if part.Thought {
			continue
		}
		ch.Text += part.Text
		if fc := part.FunctionCall; fc != nil {
			n := s.calls[c.Index]
			tc := geminiToolCall(fc, n)
			ch.ToolCalls = append(ch.ToolCalls, ToolCallDelta{Index: n, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			s.calls[c.Index] = n + 1
		}
	}
	ch.FinishReason = geminiFinish(c.FinishReason, s.calls[c.Index] > 0)
	return ch
}

// Close implements Stream.
func (s *geminiStream) Close() error { return s.sb.close() }

type gemEmbedRequest struct {
	Model                string     `json:"model,omitempty"`
	Content              gemContent `json:"content"`
	OutputDimensionality *int       `json:"outputDimensionality,omitempty"`
}

type gemValues struct {
	Values []float32 `json:"values"`
}

// Embed implements Provider: embedContent for one input, batchEmbedContents for more.
func (p *geminiProvider) Embed(ctx context.Context, m *Model, r *EmbedRequest) (*EmbedResponse, error) {
	path := geminiModelPath(m.Name)
	if len(r.Inputs) == 1 {
		var out struct {
			Embedding gemValues `json:"embedding"`
		}
		body := gemEmbedRequest{Content: gemContent{Parts: []gemPart{{Text: r.Inputs[0]}}}, OutputDimensionality: r.Dimensions}
		if err := p.up.do(ctx, http.MethodPost, path+":embedContent", body, &out); err != nil {
			return nil, err
		}
		return &EmbedResponse{Vectors: [][]float32{out.Embedding.Values}}, nil
	}
	reqs := make([]gemEmbedRequest, len(r.Inputs))
	for i, in := range r.Inputs {
		reqs[i] = gemEmbedRequest{Model: "models/" + strings.TrimPrefix(m.Name, "models/"), Content: gemContent{Parts: []gemPart{{Text: in}}}, OutputDimensionality: r.Dimensions}
	}
	var out struct {
		Embeddings []gemValues `json:"embeddings"`
	}
	if err := p.up.do(ctx, http.MethodPost, path+":batchEmbedContents", map[string]any{"requests": reqs}, &out); err != nil {
		return nil, err
	}
	if len(out.Embeddings) != len(r.Inputs) {
		return nil, upstreamProtocol(p.up.provider, "sent a different number of embeddings than inputs")
	}
	vecs := make([][]float32, len(out.Embeddings))
	for i, e := range out.Embeddings {
		vecs[i] = e.Values
	}
	return &EmbedResponse{Vectors: vecs}, nil
}

// Discover implements Provider: GET /models with page tokens.
func (p *geminiProvider) Discover(ctx context.Context) ([]ModelInfo, error) {
	var infos []ModelInfo
	token := ""
	for page := 0; page < 20; page++ {
		path := "/models?pageSize=1000"
		if token != "" {
			path += "&pageToken=" + url.QueryEscape(token)
		}
		var out struct {
			Models []struct {
				Name                       string   `json:"name"`
				InputTokenLimit            int      `json:"inputTokenLimit"`
				SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
			} `json:"models"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := p.up.do(ctx, http.MethodGet, path, nil, &out); err != nil {
			return nil, err
		}
		for _, d := range out.Models {
			in := ModelInfo{Name: strings.TrimPrefix(d.Name, "models/"), MaxTokens: d.InputTokenLimit}
			if slices.Contains(d.SupportedGenerationMethods, "generateContent") {
				in.Capabilities = append(in.Capabilities, CapChat)
			}
			if slices.Contains(d.SupportedGenerationMethods, "embedContent") {
				in.Capabilities = append(in.Capabilities, CapEmbeddings)
				in.MaxTokens = 0
			}
			if len(in.Capabilities) == 0 {
				continue // image, audio or tuning-only models
			}
			infos = append(infos, in)
		}
		if out.NextPageToken == "" {
			break
		}
		token = out.NextPageToken
	}
	return infos, nil
}
