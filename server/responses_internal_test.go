package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/responseswire"
)

// translate decodes a Responses request body and translates it as the
// handler does (no previous_response_id).
func translate(t *testing.T, body string) (*llm.Request, error) {
	t.Helper()
	var b responseswire.Request
	if err := decodeOpenAI([]byte(body), &b); err != nil {
		t.Fatal(err)
	}
	turn := &responseTurn{b: &b}
	if b.Input.IsText {
		turn.conv = []responseswire.Item{{Role: llm.RoleUser, Content: &responseswire.Content{Text: b.Input.Text, IsText: true}}}
	} else {
		turn.conv = b.Input.List
	}
	return turn.request(0)
}

func TestResponsesRequest_Translation(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name, body string
		check      func(t *testing.T, r *llm.Request)
	}{
		{"instructions become the first system message", `{"model":"m","input":"Hi","instructions":"Be brief."}`, func(t *testing.T, r *llm.Request) {
			want := []llm.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
			if !reflect.DeepEqual(r.Messages, want) {
				t.Errorf("%+v", r.Messages)
			}
		}},
		{"images are parts with the URL as sent", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"What is this?"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`, func(t *testing.T, r *llm.Request) {
			m := r.Messages[0]
			want := []llm.Part{{Text: "What is this?"}, {Image: &llm.Image{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "high"}}, {Image: &llm.Image{URL: "https://example.com/a.png"}}}
			if m.Content != "What is this?" || !reflect.DeepEqual(m.Parts, want) || !llm.HasImages(r.Messages) {
				t.Errorf("%+v", m)
			}
		}},
		{"text parts only: no Parts", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`, func(t *testing.T, r *llm.Request) {
			if r.Messages[0].Content != "a\nb" || r.Messages[0].Parts != nil {
				t.Errorf("%+v", r.Messages[0])
			}
		}},
		{"function calls join the assistant message before them", `{"model":"m","input":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Let me check."},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"g","arguments":"{\"x\":1}"},{"type":"function_call_output","call_id":"c1","output":"1"},{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"2"}]}]}`, func(t *testing.T, r *llm.Request) {
			want := []llm.Message{{Role: "user", Content: "Hi"},
				{Role: "assistant", Content: "Let me check.", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}, {ID: "c2", Name: "g", Arguments: `{"x":1}`}}},
				{Role: "tool", ToolCallID: "c1", Content: "1"}, {Role: "tool", ToolCallID: "c2", Content: "2"}}
			if !reflect.DeepEqual(r.Messages, want) {
				t.Errorf("%+v", r.Messages)
			}
		}},
		{"tools are strict unless they say not", `{"model":"m","input":"Hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"function","name":"g","strict":false,"description":"G"}],"tool_choice":"required","parallel_tool_calls":false}`, func(t *testing.T, r *llm.Request) {
			want := []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true}, {Name: "g", Description: "G"}}
			if !reflect.DeepEqual(r.Tools, want) || r.ToolChoice.Mode != "required" || r.ParallelToolCalls == nil || *r.ParallelToolCalls {
				t.Errorf("%+v %+v", r.Tools, r.ToolChoice)
			}
		}},
		{"json_schema", `{"model":"m","input":"Hi","text":{"format":{"type":"json_schema","name":"city","description":"A city","strict":true,"schema":{"type":"object"}}}}`, func(t *testing.T, r *llm.Request) {
			want := &llm.ResponseFormat{Type: "json_schema", Name: "city", Description: "A city", Schema: json.RawMessage(`{"type":"object"}`), Strict: yes}
			if !reflect.DeepEqual(r.ResponseFormat, want) {
				t.Errorf("%+v", r.ResponseFormat)
			}
		}},
		{"json_object", `{"model":"m","input":"Hi","text":{"format":{"type":"json_object"}}}`, func(t *testing.T, r *llm.Request) {
			if r.ResponseFormat == nil || r.ResponseFormat.Type != "json_object" {
				t.Errorf("%+v", r.ResponseFormat)
			}
		}},
		{"text format is no format", `{"model":"m","input":"Hi","text":{"format":{"type":"text"}}}`, func(t *testing.T, r *llm.Request) {
			if r.ResponseFormat != nil {
				t.Errorf("%+v", r.ResponseFormat)
			}
		}},
		{"knobs", `{"model":"m","input":"Hi","max_output_tokens":50,"temperature":0.2,"top_p":0.9,"safety_identifier":"u1","reasoning":{"effort":"high"},"text":{"verbosity":"low"}}`, func(t *testing.T, r *llm.Request) {
			if *r.MaxTokens != 50 || *r.Temperature != 0.2 || *r.TopP != 0.9 || r.User != "u1" || r.ReasoningEffort != "high" || string(r.Passthrough["verbosity"]) != `"low"` {
				t.Errorf("%+v", r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := translate(t, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestResponsesMessages_HistoryErrorsNamePreviousResponse(t *testing.T) {
	items := []responseswire.Item{{Type: "reasoning"}, {Role: "user", Content: &responseswire.Content{Text: "x", IsText: true}}}
	_, err := responsesMessages(items, 1)
	if ps := errs.ProblemsOf(err); len(ps) != 1 || ps[0].Field != "previous_response_id.type" {
		t.Errorf("%v", err)
	}
	_, err = responsesMessages(items, 0)
	if ps := errs.ProblemsOf(err); len(ps) != 1 || ps[0].Field != "input[0].type" {
		t.Errorf("%v", err)
	}
}

func TestCheckResponsesFields(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		pass       string // the passthrough fields, as JSON
		param      string // the refused field
	}{
		{"carried fields", `{"model":"m","input":"x","store":true,"metadata":{"a":"b"}}`, `null`, ""},
		{"passthrough", `{"model":"m","service_tier":"flex","prompt_cache_key":"k","prompt_cache_retention":"24h"}`, `{"prompt_cache_key":"k","prompt_cache_retention":"24h","service_tier":"flex"}`, ""},
		{"defaults", `{"model":"m","truncation":"disabled","background":false,"include":[],"stream_options":{"include_obfuscation":true},"prompt":null}`, `null`, ""},
		{"the first refused field by name", `{"model":"m","zeta":1,"background":true}`, ``, "background"},
		{"stream_options with more", `{"model":"m","stream_options":{"include_usage":true}}`, ``, "stream_options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.body), &fields); err != nil {
				t.Fatal(err)
			}
			pass, err := checkResponsesFields(fields)
			if tc.param != "" {
				if ps := errs.ProblemsOf(err); len(ps) != 1 || ps[0].Field != tc.param {
					t.Fatalf("%v, want %s refused", err, tc.param)
				}
				return
			}
			got, _ := json.Marshal(pass)
			if err != nil || string(got) != tc.pass {
				t.Errorf("%v %s, want %s", err, got, tc.pass)
			}
		})
	}
}
