package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	fastjson "github.com/goccy/go-json"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/openaiwire"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/responseswire"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/responses"
)

// /openai/v1/responses translates OpenAI's Responses API
// (server/llm/responseswire) to the gateway (llm.OpResponses) and back,
// keeps the responses created with store (server/responses) and answers
// errors in OpenAI's shape (the /openai/ error writer).

// initResponses builds the stored responses' keeper and registers its
// flush on shutdown.
func (s *Server) initResponses() {
	s.responses = responses.New(s.store, responses.Options{Retention: s.cfg.Responses.Retention.D(), Leases: s.leases, Logger: s.log})
	s.closers = append(s.closers, s.responses.Close)
}

// Responses returns the stored responses' keeper (tests).
func (s *Server) Responses() *responses.Keeper { return s.responses }

// responsesCarried are the request fields the route translates.
var responsesCarried = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"text": true, "reasoning": true, "max_output_tokens": true, "temperature": true, "top_p": true, "user": true,
	"safety_identifier": true, "metadata": true, "store": true, "previous_response_id": true, "stream": true,
}

// responsesPassthrough are the request fields carried verbatim to
// OpenAI-compatible upstreams under the same chat-completions name (the
// gateway refuses them for providers that cannot carry them).
var responsesPassthrough = map[string]bool{"service_tier": true, "prompt_cache_key": true, "prompt_cache_retention": true}

// responsesDefaults are request fields accepted only with a value that
// changes nothing: OpenAI's default.
var responsesDefaults = map[string]func(json.RawMessage) bool{
	"truncation": func(v json.RawMessage) bool { return jsonEqual(v, `"disabled"`) },
	"background": func(v json.RawMessage) bool { return jsonEqual(v, `false`) },
	"include":    func(v json.RawMessage) bool { return jsonEqual(v, `[]`) },
	// include_obfuscation pads deltas; Switchboard sends none either way.
	"stream_options": func(v json.RawMessage) bool {
		var o map[string]json.RawMessage
		if json.Unmarshal(v, &o) != nil {
			return false
		}
		delete(o, "include_obfuscation")
		return len(o) == 0
	},
}

// jsonEqual reports whether the JSON value v is want, spaces aside.
func jsonEqual(v json.RawMessage, want string) bool {
	if v = bytes.TrimSpace(v); string(v) == want {
		return true
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return false
	}
	return buf.String() == want
}

// checkResponsesFields refuses the first field (in name order) the route
// does not carry, naming it, and returns the passthrough fields. A field
// sent as null is not there.
func checkResponsesFields(fields map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	var pass map[string]json.RawMessage
	refused := "" // the first refused field in name order
	for k, v := range fields {
		if responsesCarried[k] || (refused != "" && k > refused) || string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		switch {
		case responsesPassthrough[k]:
			if pass == nil {
				pass = map[string]json.RawMessage{}
			}
			pass[k] = v
		case responsesDefaults[k] != nil && responsesDefaults[k](v):
		default:
			refused = k
		}
	}
	switch k, v := refused, fields[refused]; {
	case k == "":
		return pass, nil
	case responsesDefaults[k] != nil:
		return nil, invalidParam(k, "%s %s is not supported on /openai/v1/responses; remove it or send OpenAI's default", k, truncateJSON(v))
	case k == "top_logprobs":
		return nil, invalidParam(k, "top_logprobs is not supported on /openai/v1/responses (logprobs are not returned); remove it or use /openai/v1/chat/completions with logprobs")
	default:
		return nil, invalidParam(k, "%s is not supported on /openai/v1/responses; remove it", k)
	}
}

// truncateJSON shortens a raw JSON value for an error message.
func truncateJSON(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// toolKeys are the keys of a function tool the route carries; others are
// accepted only when they ask for nothing (null, false, {}, []).
var toolKeys = map[string]bool{"type": true, "name": true, "description": true, "parameters": true, "strict": true}

// checkToolFields refuses a key of a function tool the route does not carry.
func checkToolFields(raw json.RawMessage) error {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return nil // the typed decode reported it
	}
	for i, t := range tools {
		if !jsonEqual(t["type"], `"function"`) {
			continue // refused for its type
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if toolKeys[k] {
				continue
			}
			if neutralJSON(t[k]) {
				continue
			}
			return invalidParam(fmt.Sprintf("tools[%d].%s", i, k), "tools[%d].%s is not supported on /openai/v1/responses; remove it", i, k)
		}
	}
	return nil
}

// maxConversationBytes bounds a conversation continued with
// previous_response_id (its stored turns and the new request), so that a
// long chain cannot grow stored responses without end.
const maxConversationBytes = 16 << 20

// metadata limits, as on OpenAI.
const (
	maxMetadataKeys  = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// responseTurn is one POST /responses being answered.
type responseTurn struct {
	b     *responseswire.Request
	id    string
	owner string
	store bool
	// conv is the conversation answered, as input items: the earlier
	// turns of previous_response_id, then the request's input.
	conv []responseswire.Item
	// tools is the request's tools as echoed (strict resolved).
	tools []responseswire.Tool
}

// principalOf is the id of the credential calling, which owns the
// responses it creates.
func principalOf(ctx context.Context) string {
	if p := auth.FromContext(ctx); p != nil {
		return p.ID
	}
	return ""
}

// OpenaiCreateResponse implements POST /openai/v1/responses.
func (h *handlers) OpenaiCreateResponse(ctx context.Context, req api.OpenaiCreateResponseRequestObject) (api.OpenaiCreateResponseResponseObject, error) {
	body := *req.Body
	var b responseswire.Request
	if err := decodeOpenAI(body, &b); err != nil {
		return nil, err
	}
	fields, err := openaiwire.Fields(body)
	if err != nil {
		return nil, err
	}
	pass, err := checkResponsesFields(fields)
	if err != nil {
		return nil, err
	}
	if raw, ok := fields["tools"]; ok {
		if err := checkToolFields(raw); err != nil {
			return nil, err
		}
	}
	// Stored ids sort by creation time (server/ids): the store appends them.
	t := &responseTurn{b: &b, id: ids.New("resp_", time.Now()), owner: principalOf(ctx), store: b.Store == nil || *b.Store}
	if b.PreviousResponseID != "" {
		prev, err := h.s.responses.Get(ctx, t.owner, b.PreviousResponseID)
		if err != nil {
			if errs.KindOf(err) == errs.NotFound {
				return nil, errs.E(errs.NotFound, "previous response with id %q not found: it was never stored (store: false), expired, was deleted, or belongs to another credential", b.PreviousResponseID).
					WithDetails(map[string]any{"param": "previous_response_id"})
			}
			return nil, err
		}
		if n := len(prev.Input) + len(prev.Response) + len(body); n > maxConversationBytes {
			return nil, errs.E(errs.TooLarge, "the conversation of previous_response_id %q is %d bytes with this input; at most %d: start a new conversation (without previous_response_id) or send a shorter input", b.PreviousResponseID, n, maxConversationBytes).
				WithDetails(map[string]any{"param": "previous_response_id", "limit": maxConversationBytes})
		}
		var input []responseswire.Item
		var answered struct {
			Output []responseswire.Item `json:"output"`
		}
		if err := json.Unmarshal(prev.Input, &input); err != nil {
			return nil, fmt.Errorf("decode stored response %s: %w", prev.ID, err)
		}
		if err := json.Unmarshal(prev.Response, &answered); err != nil {
			return nil, fmt.Errorf("decode stored response %s: %w", prev.ID, err)
		}
		t.conv = append(append(t.conv, input...), answered.Output...)
	}
	history := len(t.conv)
	if b.Input.IsText {
		t.conv = append(t.conv, responseswire.Item{Type: responseswire.ItemMessage, Role: llm.RoleUser, Content: &responseswire.Content{Text: b.Input.Text, IsText: true}})
	} else {
		t.conv = append(t.conv, b.Input.List...)
	}
	r, err := t.request(history)
	if err != nil {
		return nil, err
	}
	for k, v := range pass {
		if r.Passthrough == nil {
			r.Passthrough = map[string]json.RawMessage{}
		}
		r.Passthrough[k] = v
	}
	if b.Stream {
		st, err := h.s.llm.Stream(ctx, llm.OpResponses, r)
		if err != nil {
			return nil, responsesError(err)
		}
		return &responsesStream{s: h.s, ctx: ctx, st: st, t: t}, nil
	}
	res, err := h.s.llm.Complete(ctx, llm.OpResponses, r)
	if err != nil {
		return nil, responsesError(err)
	}
	var out outputItems
	out.setResult(res)
	status, incomplete := statusOf(res.FinishReason)
	resp := t.response(res.Model.ID, res.CreatedAt.Unix(), status, incomplete, &out, &res.Usage)
	whole, err := h.s.keep(t, resp)
	if err != nil {
		return nil, err
	}
	if whole != nil {
		return &openAIJSON{v: whole}, nil // encoded once, for the store and the answer
	}
	return &openAIJSON{v: resp}, nil
}

// keep stores the answered response when the request asked for it, and
// returns it encoded (nil when not stored).
func (s *Server) keep(t *responseTurn, resp *responseswire.Response) (json.RawMessage, error) {
	if !t.store {
		return nil, nil
	}
	input, err := fastjson.Marshal(t.conv)
	if err != nil {
		return nil, err
	}
	whole, err := fastjson.Marshal(resp)
	if err != nil {
		return nil, err
	}
	s.responses.Put(&responses.Stored{ID: t.id, Owner: t.owner, Input: input, Response: whole})
	return whole, nil
}

// responsesError names the Responses API's fields in the gateway's
// validation problems (max_output_tokens, not maxTokens; input, not
// messages).
func responsesError(err error) error {
	ps := errs.ProblemsOf(err)
	if len(ps) == 0 || errs.KindOf(err) != errs.Validation {
		return err
	}
	out := make([]errs.Problem, len(ps))
	for i, p := range ps {
		switch {
		case p.Field == "maxTokens":
			p.Field = "max_output_tokens"
		case p.Field == "toolChoice":
			p.Field = "tool_choice"
		case strings.HasPrefix(p.Field, "messages"):
			p.Field = "input"
		default:
			p.Field = snakeCase(p.Field)
		}
		out[i] = p
	}
	return errs.Problems("invalid request", out)
}

// request translates the turn to the gateway's request; items before
// history came from previous_response_id (they were checked when sent).
func (t *responseTurn) request(history int) (*llm.Request, error) {
	b := t.b
	r := &llm.Request{Model: b.Model, MaxTokens: b.MaxOutputTokens, Temperature: b.Temperature, TopP: b.TopP,
		ParallelToolCalls: b.ParallelToolCalls, User: b.User}
	if r.User == "" {
		r.User = b.SafetyIdentifier
	}
	if b.Instructions != nil && *b.Instructions != "" {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleSystem, Content: *b.Instructions})
	}
	msgs, err := responsesMessages(t.conv, history)
	if err != nil {
		return nil, err
	}
	r.Messages = append(r.Messages, msgs...)
	if len(b.Metadata) > maxMetadataKeys {
		return nil, invalidParam("metadata", "at most %d keys, got %d", maxMetadataKeys, len(b.Metadata))
	}
	for k, v := range b.Metadata {
		if len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return nil, invalidParam("metadata."+k, "keys are at most %d characters and values at most %d", maxMetadataKey, maxMetadataValue)
		}
	}
	if len(b.Tools) > llm.MaxFunctions {
		return nil, invalidParam("tools", "at most %d tools", llm.MaxFunctions)
	}
	for i, tool := range b.Tools {
		if tool.Type != "function" {
			return nil, invalidParam(fmt.Sprintf("tools[%d].type", i), "only function tools are supported, got %q; built-in tools (web_search, file_search, ...) are not", tool.Type)
		}
		if tool.Name == "" {
			return nil, invalidParam(fmt.Sprintf("tools[%d].name", i), "is required")
		}
		strict := tool.Strict == nil || *tool.Strict // OpenAI's default on /responses
		lt := llm.Tool{Name: tool.Name, Parameters: tool.Parameters, Strict: strict}
		if tool.Description != nil {
			lt.Description = *tool.Description
		}
		r.Tools = append(r.Tools, lt)
		tool.Strict = &strict
		t.tools = append(t.tools, tool)
	}
	if tc := b.ToolChoice; tc != nil {
		switch tc.Mode {
		case responseswire.ToolChoiceNone, responseswire.ToolChoiceAuto, responseswire.ToolChoiceRequired:
			r.ToolChoice = &llm.ToolChoice{Mode: tc.Mode}
		case responseswire.ToolChoiceFunction:
			if tc.Name == "" {
				return nil, invalidParam("tool_choice.name", "is required")
			}
			r.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceFunction, Name: tc.Name}
		default:
			return nil, invalidParam("tool_choice.type", "only none, auto, required or a function are supported, got %q", tc.Mode)
		}
	}
	if b.Text != nil {
		if f := b.Text.Format; f != nil {
			switch f.Type {
			case responseswire.FormatText:
			case responseswire.FormatJSONObject:
				r.ResponseFormat = &llm.ResponseFormat{Type: llm.FormatJSONObject}
			case responseswire.FormatJSONSchema:
				if f.Name == "" {
					return nil, invalidParam("text.format.name", "is required for json_schema")
				}
				if len(f.Schema) == 0 {
					return nil, invalidParam("text.format.schema", "is required for json_schema")
				}
				r.ResponseFormat = &llm.ResponseFormat{Type: llm.FormatJSONSchema, Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict != nil && *f.Strict}
			default:
				return nil, invalidParam("text.format.type", "must be text, json_object or json_schema, got %q", f.Type)
			}
		}
		if v := b.Text.Verbosity; v != nil {
			raw, _ := json.Marshal(*v)
			r.Passthrough = map[string]json.RawMessage{"verbosity": raw}
		}
	}
	if rs := b.Reasoning; rs != nil {
		if rs.Summary != nil || rs.GenerateSummary != nil {
			return nil, invalidParam("reasoning.summary", "reasoning summaries are not supported on /openai/v1/responses; remove reasoning.summary")
		}
		if rs.Effort != nil {
			switch *rs.Effort {
			case llm.EffortMinimal, llm.EffortLow, llm.EffortMedium, llm.EffortHigh:
				r.ReasoningEffort = *rs.Effort
			default:
				return nil, invalidParam("reasoning.effort", "must be minimal, low, medium or high, got %q", *rs.Effort)
			}
		}
	}
	return r, nil
}

// responsesMessages translates input items to messages: a message item
// to a message, function_call items to the tool calls of an assistant
// message (the one just before when there is one), a function_call_output
// to a tool message. Items from index history on are the request's own,
// named input[i-history] in errors.
func responsesMessages(items []responseswire.Item, history int) ([]llm.Message, error) {
	var out []llm.Message
	at := func(i int) string {
		if i < history {
			return "previous_response_id"
		}
		return fmt.Sprintf("input[%d]", i-history)
	}
	lastCall := -1 // index in out of the assistant message the last item extended
	for i, it := range items {
		switch it.ItemType() {
		case responseswire.ItemMessage:
			role := it.Role
			switch role {
			case llm.RoleUser, llm.RoleSystem, llm.RoleAssistant:
			case "developer":
				role = llm.RoleSystem
			case "":
				return nil, invalidParam(at(i)+".role", "is required")
			default:
				return nil, invalidParam(at(i)+".role", "must be user, system, developer or assistant, got %q", it.Role)
			}
			if it.Content == nil {
				return nil, invalidParam(at(i)+".content", "is required")
			}
			msg := llm.Message{Role: role}
			if it.Content.IsText {
				msg.Content = it.Content.Text
			} else if err := contentOf(it.Content, &msg, at(i)+".content"); err != nil {
				return nil, err
			}
			if msg.Parts != nil && role != llm.RoleUser {
				return nil, invalidParam(at(i)+".content", "input_image parts are only accepted in user messages, not in %s messages", it.Role)
			}
			out = append(out, msg)
			lastCall = -1
			if role == llm.RoleAssistant {
				lastCall = len(out) - 1
			}
		case responseswire.ItemFunctionCall:
			if it.CallID == "" {
				return nil, invalidParam(at(i)+".call_id", "is required")
			}
			if it.Name == "" {
				return nil, invalidParam(at(i)+".name", "is required")
			}
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			if lastCall < 0 {
				out = append(out, llm.Message{Role: llm.RoleAssistant})
				lastCall = len(out) - 1
			}
			out[lastCall].ToolCalls = append(out[lastCall].ToolCalls, llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		case responseswire.ItemFunctionCallOutput:
			if it.CallID == "" {
				return nil, invalidParam(at(i)+".call_id", "is required")
			}
			if it.Output == nil {
				return nil, invalidParam(at(i)+".output", "is required")
			}
			msg := llm.Message{Role: llm.RoleTool, ToolCallID: it.CallID}
			if err := contentOf(it.Output, &msg, at(i)+".output"); err != nil {
				return nil, err
			}
			if msg.Parts != nil {
				return nil, invalidParam(at(i)+".output", "images in function_call_output are not supported; send text")
			}
			out = append(out, msg)
			lastCall = -1
		default:
			return nil, invalidParam(at(i)+".type", "input items of type %q are not supported (message, function_call and function_call_output are)", it.Type)
		}
	}
	return out, nil
}

// contentOf sets msg's Content (and Parts, when there is an image) from c.
func contentOf(c *responseswire.Content, msg *llm.Message, field string) error {
	if c.IsText {
		msg.Content = c.Text
		return nil
	}
	var texts []string
	var parts []llm.Part
	images := false
	for j, p := range c.List {
		switch p.Type {
		case responseswire.PartInputText, responseswire.PartOutputText:
			texts = append(texts, p.Text)
			parts = append(parts, llm.Part{Text: p.Text})
		case responseswire.PartRefusal:
			texts = append(texts, p.Refusal)
			parts = append(parts, llm.Part{Text: p.Refusal})
		case responseswire.PartInputImage:
			if p.ImageURL == "" {
				if p.FileID != "" {
					return invalidParam(fmt.Sprintf("%s[%d].file_id", field, j), "images by file_id are not supported; send image_url (a data: or https URL)")
				}
				return invalidParam(fmt.Sprintf("%s[%d].image_url", field, j), "is required")
			}
			switch p.Detail {
			case "", "auto", "low", "high", "original":
			default:
				return invalidParam(fmt.Sprintf("%s[%d].detail", field, j), "must be auto, low, high or original, got %q", p.Detail)
			}
			images = true
			parts = append(parts, llm.Part{Image: &llm.Image{URL: p.ImageURL, Detail: p.Detail}})
		default:
			return invalidParam(fmt.Sprintf("%s[%d].type", field, j), "content parts of type %q are not supported (input_text, output_text, refusal and input_image are)", p.Type)
		}
	}
	msg.Content = strings.Join(texts, "\n")
	if images {
		msg.Parts = parts
	}
	return nil
}

// statusOf is a response's status for the finish reason of its call.
func statusOf(finish string) (status string, incomplete *responseswire.IncompleteDetails) {
	switch finish {
	case llm.FinishLength:
		return responseswire.StatusIncomplete, &responseswire.IncompleteDetails{Reason: "max_output_tokens"}
	case llm.FinishContentFilter:
		return responseswire.StatusIncomplete, &responseswire.IncompleteDetails{Reason: "content_filter"}
	}
	return responseswire.StatusCompleted, nil
}

// outputItem is one output item being built: a message or a function call.
type outputItem struct {
	call   bool
	id     string
	text   strings.Builder
	callID string
	name   string
	args   strings.Builder
}

// outputItems are a response's output items in order.
type outputItems struct {
	items []*outputItem
	// calls maps a streamed tool call's index to its item.
	calls map[int]*outputItem
}

func (o *outputItems) addMessage() *outputItem {
	it := &outputItem{id: llm.NewID("msg_")}
	o.items = append(o.items, it)
	return it
}

func (o *outputItems) addCall(callID, name string) *outputItem {
	if callID == "" {
		callID = llm.NewID("call_")
	}
	it := &outputItem{call: true, id: llm.NewID("fc_"), callID: callID, name: name}
	o.items = append(o.items, it)
	return it
}

// setResult fills the items from a finished call: the message (when it
// has text, or nothing else was produced), then each tool call.
func (o *outputItems) setResult(res *llm.Result) {
	if res.Text != "" || len(res.ToolCalls) == 0 {
		o.addMessage().text.WriteString(res.Text)
	}
	for _, tc := range res.ToolCalls {
		o.addCall(tc.ID, tc.Name).args.WriteString(tc.Arguments)
	}
}

// item is it on the wire with status.
func (it *outputItem) item(status string) any {
	if it.call {
		args := it.args.String()
		if strings.TrimSpace(args) == "" && status != responseswire.StatusInProgress {
			args = "{}"
		}
		return &responseswire.FunctionCall{ID: it.id, Type: responseswire.ItemFunctionCall, Status: status, CallID: it.callID, Name: it.name, Arguments: args}
	}
	m := &responseswire.OutputMessage{ID: it.id, Type: responseswire.ItemMessage, Status: status, Role: llm.RoleAssistant, Content: []responseswire.OutputText{}}
	if status != responseswire.StatusInProgress {
		m.Content = append(m.Content, responseswire.NewOutputText(it.text.String()))
	}
	return m
}

// wire returns the items on the wire with status.
func (o *outputItems) wire(status string) []any {
	out := make([]any, len(o.items))
	for i, it := range o.items {
		out[i] = it.item(status)
	}
	return out
}

// response is the response object of the turn, as answered or stored:
// the output, the usage (nil while in progress) and the request's fields
// echoed as OpenAI echoes them.
func (t *responseTurn) response(model string, created int64, status string, incomplete *responseswire.IncompleteDetails, out *outputItems, u *llm.Usage) *responseswire.Response {
	b := t.b
	itemStatus := status
	if status == responseswire.StatusFailed {
		itemStatus = responseswire.StatusIncomplete
	}
	resp := &responseswire.Response{
		ID: t.id, Object: "response", CreatedAt: created, Status: status, IncompleteDetails: incomplete,
		Instructions: b.Instructions, MaxOutputTokens: b.MaxOutputTokens, Model: model, Output: out.wire(itemStatus),
		ParallelToolCalls: b.ParallelToolCalls == nil || *b.ParallelToolCalls, Store: t.store,
		Temperature: 1, TopP: 1, Truncation: "disabled", Tools: t.tools, ToolChoice: responseswire.ToolChoice{Mode: responseswire.ToolChoiceAuto},
		Text: responseswire.TextConfig{Format: textFormat}, Metadata: b.Metadata,
	}
	if status == responseswire.StatusInProgress {
		resp.Output = []any{}
	}
	if resp.Tools == nil {
		resp.Tools = []responseswire.Tool{}
	}
	if resp.Metadata == nil {
		resp.Metadata = noMetadata
	}
	if b.PreviousResponseID != "" {
		resp.PreviousResponseID = &b.PreviousResponseID
	}
	if b.Temperature != nil {
		resp.Temperature = *b.Temperature
	}
	if b.TopP != nil {
		resp.TopP = *b.TopP
	}
	if b.ToolChoice != nil {
		resp.ToolChoice = *b.ToolChoice
	}
	if b.Text != nil {
		if b.Text.Format != nil {
			resp.Text.Format = b.Text.Format
		}
		resp.Text.Verbosity = b.Text.Verbosity
	}
	if b.Reasoning != nil {
		resp.Reasoning.Effort = b.Reasoning.Effort
	}
	if b.User != "" {
		resp.User = &b.User
	}
	if b.SafetyIdentifier != "" {
		resp.SafetyIdentifier = &b.SafetyIdentifier
	}
	if u != nil {
		resp.Usage = &responseswire.Usage{
			InputTokens: u.PromptTokens, InputTokensDetails: responseswire.InputTokensDetails{CachedTokens: u.CachedPromptTokens},
			OutputTokens: u.CompletionTokens, TotalTokens: u.Total(),
		}
	}
	if status != responseswire.StatusInProgress {
		resp.CompletedAt = &resp.CreatedAt
	}
	return resp
}

// textFormat and noMetadata are the defaults of every response that does
// not set them; shared, never modified.
var (
	textFormat = &responseswire.Format{Type: responseswire.FormatText}
	noMetadata = map[string]string{}
)

// OpenaiGetResponse implements GET /openai/v1/responses/{id}.
func (h *handlers) OpenaiGetResponse(ctx context.Context, req api.OpenaiGetResponseRequestObject) (api.OpenaiGetResponseResponseObject, error) {
	s, err := h.s.responses.Get(ctx, principalOf(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return &openAIJSON{v: s.Response}, nil
}

// OpenaiDeleteResponse implements DELETE /openai/v1/responses/{id}.
func (h *handlers) OpenaiDeleteResponse(ctx context.Context, req api.OpenaiDeleteResponseRequestObject) (api.OpenaiDeleteResponseResponseObject, error) {
	if err := h.s.responses.Delete(ctx, principalOf(ctx), req.Id); err != nil {
		return nil, err
	}
	return &openAIJSON{v: &responseswire.Deleted{ID: req.Id, Object: "response.deleted", Deleted: true}}, nil
}

func (o *openAIJSON) VisitOpenaiCreateResponseResponse(w http.ResponseWriter) error {
	return o.write(w)
}
func (o *openAIJSON) VisitOpenaiGetResponseResponse(w http.ResponseWriter) error { return o.write(w) }
func (o *openAIJSON) VisitOpenaiDeleteResponseResponse(w http.ResponseWriter) error {
	return o.write(w)
}

// responsesStream writes a streamed response as OpenAI's event sequence
// and keeps the response when it completes.
type responsesStream struct {
	s   *Server
	ctx context.Context
	st  *llm.ResultStream
	t   *responseTurn
}

func (rs *responsesStream) VisitOpenaiCreateResponseResponse(w http.ResponseWriter) error {
	defer rs.st.Close()
	sw := startSSE(w)
	created := rs.st.CreatedAt.Unix()
	model := rs.st.Model().ID
	var (
		seq  int
		out  = outputItems{calls: map[int]*outputItem{}}
		open *outputItem // the message item receiving text, if any
	)
	send := func(typ string, ev any) bool {
		// Every event's sequence_number is set by the caller from seq.
		seq++
		return sw.event(typ, ev)
	}
	lifecycle := func(typ, status string, incomplete *responseswire.IncompleteDetails, u *llm.Usage) *responseswire.ResponseEvent {
		return &responseswire.ResponseEvent{Type: typ, SequenceNumber: seq, Response: rs.t.response(model, created, status, incomplete, &out, u)}
	}
	indexOf := func(it *outputItem) int { return slices.Index(out.items, it) }
	closeMessage := func(status string) bool {
		if open == nil {
			return true
		}
		it, idx, text := open, indexOf(open), open.text.String()
		open = nil
		return send(responseswire.EventOutputTextDone, &responseswire.TextDoneEvent{Type: responseswire.EventOutputTextDone, SequenceNumber: seq, ItemID: it.id, OutputIndex: idx, Text: text, Logprobs: []json.RawMessage{}}) &&
			send(responseswire.EventContentPartDone, &responseswire.PartEvent{Type: responseswire.EventContentPartDone, SequenceNumber: seq, ItemID: it.id, OutputIndex: idx, Part: responseswire.NewOutputText(text)}) &&
			send(responseswire.EventOutputItemDone, &responseswire.ItemEvent{Type: responseswire.EventOutputItemDone, SequenceNumber: seq, OutputIndex: idx, Item: it.item(status)})
	}
	openMessage := func() bool {
		open = out.addMessage()
		idx := indexOf(open)
		return send(responseswire.EventOutputItemAdded, &responseswire.ItemEvent{Type: responseswire.EventOutputItemAdded, SequenceNumber: seq, OutputIndex: idx, Item: open.item(responseswire.StatusInProgress)}) &&
			send(responseswire.EventContentPartAdded, &responseswire.PartEvent{Type: responseswire.EventContentPartAdded, SequenceNumber: seq, ItemID: open.id, OutputIndex: idx, Part: responseswire.NewOutputText("")})
	}
	closeCall := func(it *outputItem, status string) bool {
		idx := indexOf(it)
		done := it.item(status).(*responseswire.FunctionCall)
		return send(responseswire.EventFunctionArgumentsDone, &responseswire.ArgumentsDoneEvent{Type: responseswire.EventFunctionArgumentsDone, SequenceNumber: seq, ItemID: it.id, OutputIndex: idx, Name: it.name, Arguments: done.Arguments}) &&
			send(responseswire.EventOutputItemDone, &responseswire.ItemEvent{Type: responseswire.EventOutputItemDone, SequenceNumber: seq, OutputIndex: idx, Item: done})
	}

	if !send(responseswire.EventCreated, lifecycle(responseswire.EventCreated, responseswire.StatusInProgress, nil, nil)) ||
		!send(responseswire.EventInProgress, lifecycle(responseswire.EventInProgress, responseswire.StatusInProgress, nil, nil)) {
		return nil
	}
	// Reused for every text delta: each is encoded when it is filled in.
	textDelta := responseswire.TextDeltaEvent{Type: responseswire.EventOutputTextDelta, Logprobs: []json.RawMessage{}}
	err := eachChunk(sw, rs.st, func(ch llm.Chunk) bool {
		if ch.Choice != 0 {
			return true
		}
		if ch.Text != "" {
			if open == nil && !openMessage() {
				return false
			}
			open.text.WriteString(ch.Text)
			textDelta.SequenceNumber, textDelta.ItemID, textDelta.OutputIndex, textDelta.Delta = seq, open.id, indexOf(open), ch.Text
			if !send(responseswire.EventOutputTextDelta, &textDelta) {
				return false
			}
		}
		for _, d := range ch.ToolCalls {
			it := out.calls[d.Index]
			if it == nil {
				if !closeMessage(responseswire.StatusCompleted) {
					return false
				}
				it = out.addCall(d.ID, d.Name)
				out.calls[d.Index] = it
				if !send(responseswire.EventOutputItemAdded, &responseswire.ItemEvent{Type: responseswire.EventOutputItemAdded, SequenceNumber: seq, OutputIndex: indexOf(it), Item: it.item(responseswire.StatusInProgress)}) {
					return false
				}
			} else if it.name == "" && d.Name != "" {
				it.name = d.Name
			}
			if d.Arguments == "" {
				continue
			}
			it.args.WriteString(d.Arguments)
			if !send(responseswire.EventFunctionArgumentsDelta, &responseswire.ArgumentsDeltaEvent{Type: responseswire.EventFunctionArgumentsDelta, SequenceNumber: seq, ItemID: it.id, OutputIndex: indexOf(it), Delta: d.Arguments}) {
				return false
			}
		}
		return true
	})
	switch {
	case err == errClientGone:
		return nil // Close cancels the upstream and records what was used
	case err != nil:
		rs.s.streamFailed(rs.ctx, err)
		e := openAIErrorBody(classify(err))
		code := ""
		if e.Code != nil {
			code = *e.Code
		}
		if !send(responseswire.EventError, &responseswire.ErrorEvent{Type: responseswire.EventError, SequenceNumber: seq, Code: code, Message: e.Message, Param: e.Param}) {
			return nil
		}
		failed := lifecycle(responseswire.EventFailed, responseswire.StatusFailed, nil, nil)
		failed.Response.Error = &responseswire.ResponseError{Code: code, Message: e.Message}
		send(responseswire.EventFailed, failed)
		return nil
	}
	res := rs.st.Result()
	status, incomplete := statusOf(res.FinishReason)
	if len(out.items) == 0 && !openMessage() {
		return nil
	}
	// The items still open are done, in output order.
	for _, it := range out.items {
		switch {
		case it == open:
			if !closeMessage(status) {
				return nil
			}
		case it.call:
			if !closeCall(it, status) {
				return nil
			}
		}
	}
	typ := responseswire.EventCompleted
	if status == responseswire.StatusIncomplete {
		typ = responseswire.EventIncomplete
	}
	final := lifecycle(typ, status, incomplete, &res.Usage)
	if _, err := rs.s.keep(rs.t, final.Response); err != nil {
		rs.s.streamFailed(rs.ctx, err)
	}
	send(typ, final)
	return nil
}
