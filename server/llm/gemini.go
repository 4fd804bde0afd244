package llm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// geminiProvider speaks the Gemini API (generativelanguage.googleapis.com):
// generateContent, streamGenerateContent?alt=sse, embedContent /
// batchEmbedContents, functionDeclarations and the model list.
type geminiProvider struct{ up upstream }

var _ Provider = (*geminiProvider)(nil)

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
	FunctionCall     *gemFunctionCall `json:"functionCall,omitempty"`
	FunctionResponse *gemFunctionResp `json:"functionResponse,omitempty"`
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
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"topP,omitempty"`
	MaxOutputTokens  *int     `json:"maxOutputTokens,omitempty"`
	StopSequences    []string `json:"stopSequences,omitempty"`
	PresencePenalty  *float64 `json:"presencePenalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequencyPenalty,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
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
	Candidates []struct {
		Content      gemContent `json:"content"`
		FinishReason string     `json:"finishReason"`
		Index        int        `json:"index"`
	} `json:"candidates"`
	UsageMetadata  *gemUsage `json:"usageMetadata"`
	ResponseID     string    `json:"responseId"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	Error json.RawMessage `json:"error"`
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
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty, Seed: r.Seed}
	if gc.Temperature != nil || gc.TopP != nil || gc.MaxOutputTokens != nil || len(gc.StopSequences) > 0 ||
		gc.PresencePenalty != nil || gc.FrequencyPenalty != nil || gc.Seed != nil {
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
			if msg.Content != "" {
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
		default:
			role = "user"
			if msg.Content != "" {
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
	}
	return w
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
	c := out.Candidates[0]
	var text strings.Builder
	for i, part := range c.Content.Parts {
		if part.Thought {
			continue
		}
		text.WriteString(part.Text)
		if fc := part.FunctionCall; fc != nil {
			resp.ToolCalls = append(resp.ToolCalls, geminiToolCall(fc, i))
		}
	}
	resp.Text = text.String()
	resp.FinishReason = geminiFinish(c.FinishReason, len(resp.ToolCalls) > 0)
	return resp, nil
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
	sb    *streamBody
	calls int
}

// Next implements Stream.
func (s *geminiStream) Next() (Chunk, error) {
	for {
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
		ch := Chunk{Usage: out.UsageMetadata.usage()}
		if len(out.Candidates) > 0 {
			c := out.Candidates[0]
			for _, part := range c.Content.Parts {
				if part.Thought {
					continue
				}
				ch.Text += part.Text
				if fc := part.FunctionCall; fc != nil {
					tc := geminiToolCall(fc, s.calls)
					ch.ToolCalls = append(ch.ToolCalls, ToolCallDelta{Index: s.calls, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
					s.calls++
				}
			}
			ch.FinishReason = geminiFinish(c.FinishReason, s.calls > 0)
		} else if out.PromptFeedback != nil && out.PromptFeedback.BlockReason != "" {
			ch.FinishReason = FinishContentFilter
		}
		return ch, nil
	}
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
