package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

const testSchema = `{"type":"object","properties":{"n":{"type":"integer"},"tag":{"$ref":"#/$defs/tag"}},"required":["n"],"additionalProperties":false,"$defs":{"tag":{"enum":["a","b"]}}}`

func TestCompileFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		rf   ResponseFormat
		want []string // fields with a problem
	}{
		{"text needs nothing", ResponseFormat{Type: FormatText}, nil},
		{"json_object needs nothing", ResponseFormat{Type: FormatJSONObject}, nil},
		{"json_schema", ResponseFormat{Type: FormatJSONSchema, Name: "s", Schema: json.RawMessage(testSchema)}, nil},
		{"no type", ResponseFormat{}, []string{"responseFormat.type"}},
		{"unknown type", ResponseFormat{Type: "xml"}, []string{"responseFormat.type"}},
		{"no name, no schema", ResponseFormat{Type: FormatJSONSchema}, []string{"responseFormat.name", "responseFormat.schema"}},
		{"a name with spaces", ResponseFormat{Type: FormatJSONSchema, Name: "my schema", Schema: json.RawMessage(`{}`)}, []string{"responseFormat.name"}},
		{"a schema that is not an object", ResponseFormat{Type: FormatJSONSchema, Name: "s", Schema: json.RawMessage(`[1]`)}, []string{"responseFormat.schema"}},
		{"a dangling $ref", ResponseFormat{Type: FormatJSONSchema, Name: "s", Schema: json.RawMessage(`{"$ref":"#/$defs/x"}`)}, []string{"responseFormat.schema"}},
		{"a $ref to another document", ResponseFormat{Type: FormatJSONSchema, Name: "s", Schema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}, []string{"responseFormat.schema"}},
		{"a keyword of the wrong type", ResponseFormat{Type: FormatJSONSchema, Name: "s", Schema: json.RawMessage(`{"type":"object","required":"n"}`)}, []string{"responseFormat.schema"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := compileFormat(&tc.rf)
			var got []string
			for _, p := range ps {
				got = append(got, p.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("problems %v, want fields %v", ps, tc.want)
			}
		})
	}
}

func TestFormatCheck(t *testing.T) {
	schema, _ := compileFormat(&ResponseFormat{Type: FormatJSONSchema, Name: "s", Schema: json.RawMessage(testSchema)})
	object, _ := compileFormat(&ResponseFormat{Type: FormatJSONObject})
	for _, tc := range []struct {
		name   string
		f      *compiledFormat
		output string
		want   string // the start of the first problem; "" when it conforms
	}{
		{"conforms", schema, `{"n": 1, "tag": "a"}`, ""},
		{"conforms, with blanks around", schema, " \n{\"n\": 1}\n", ""},
		{"a required property missing", schema, `{"tag": "a"}`, "the output does not conform to the schema"},
		{"an enum broken through $ref", schema, `{"n": 1, "tag": "c"}`, "the output does not conform to the schema"},
		{"an extra property", schema, `{"n": 1, "x": 2}`, "the output does not conform to the schema"},
		{"a wrong type", schema, `{"n": "1"}`, "the output does not conform to the schema"},
		{"not JSON", schema, `Here you go: {"n": 1}`, "the output is not valid JSON"},
		{"two documents", schema, `{"n": 1}{"n": 2}`, "the output is not valid JSON"},
		{"an object", object, `{"a": [1]}`, ""},
		{"an array is not an object", object, `[{"a": 1}]`, "the output is not a JSON object"},
		{"truncated", object, `{"a": `, "the output is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := tc.f.check(tc.output)
			switch {
			case tc.want == "" && len(ps) > 0:
				t.Errorf("conforming output refused: %v", ps)
			case tc.want != "" && (len(ps) == 0 || !strings.HasPrefix(ps[0], tc.want)):
				t.Errorf("problems %v, want %q", ps, tc.want)
			}
		})
	}
}

// fieldless is an OpenAI-type provider that, like Anthropic's, carries
// neither n nor passthrough fields.
type fieldless struct{ Provider }

func (fieldless) Unsupported(_ *Model, r *Request) []string {
	var out []string
	if r.N > 1 {
		out = append(out, "n")
	}
	for k := range r.Passthrough {
		out = append(out, k)
	}
	return out
}

func TestUnsupportedFieldsAreRefusedAndSkipFallbacks(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": serve(t, "openai/chat_completion.json", 200)})
	g, _ := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("narrow", "openai/wide"), chatModel("wide")))
	narrow, err := g.Catalog.Lookup("openai/narrow")
	if err != nil {
		t.Fatal(err)
	}
	narrow.provider = fieldless{narrow.provider}
	hi := []Message{{Role: RoleUser, Content: "Hi"}}

	_, err = g.Complete(context.Background(), OpChat, &Request{Model: "openai/narrow", Messages: hi, Passthrough: map[string]json.RawMessage{"logprobs": json.RawMessage(`true`)}})
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid || e.Details["param"] != "logprobs" || !strings.Contains(e.Message, "logprobs is not supported by model openai/narrow") {
		t.Fatalf("want a 400 naming logprobs, got %v", err)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("%d upstream requests for a refused request", n)
	}

	// A fallback that cannot carry the request's fields is skipped: wide
	// (which can) is asked first, fails, and narrow is not tried.
	g2, _ := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("wide", "openai/narrow"), chatModel("narrow")))
	wide, _ := g2.Catalog.Lookup("openai/wide")
	narrow2, _ := g2.Catalog.Lookup("openai/narrow")
	narrow2.provider = fieldless{narrow2.provider}
	if cands := g2.candidates(context.Background(), OpChat, wide, &Request{N: 2}); len(cands) != 1 {
		t.Errorf("candidates %v, want wide alone", cands)
	}
	if cands := g2.candidates(context.Background(), OpChat, wide, &Request{}); len(cands) != 2 {
		t.Errorf("candidates %v, want wide and narrow", cands)
	}
}

func TestChoicesAndParallelCalls(t *testing.T) {
	const twoCalls = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"},` +
		`{"index":1,"message":{"role":"assistant","content":"second"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
	const stream = `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}},{"index":1,"delta":{"content":"sec"}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"choices":[{"index":1,"delta":{"content":"ond"},"finish_reason":"length"}]}` + "\n\n" + "data: [DONE]\n\n"
	up := newFake(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
		if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, twoCalls)
	}})
	g, _ := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("m")))
	tools := []Tool{{Name: "f"}, {Name: "g"}}
	no, yes := false, true
	for _, tc := range []struct {
		name     string
		parallel *bool
		calls    int
	}{
		{"parallel calls allowed", &yes, 2},
		{"parallel calls by default", nil, 2},
		{"parallel calls off: the first call only", &no, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := func() *Request {
				return &Request{Model: "openai/m", N: 2, Messages: []Message{{Role: RoleUser, Content: "Hi"}}, Tools: tools, ParallelToolCalls: tc.parallel}
			}
			res, err := g.Complete(context.Background(), OpCompatChat, req())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ToolCalls) != tc.calls || res.ToolCalls[0].Name != "f" || len(res.More) != 1 || res.More[0].Text != "second" || res.More[0].FinishReason != FinishLength {
				t.Errorf("result %+v", res)
			}
			st, err := g.Stream(context.Background(), OpCompatChat, req())
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := st.Next(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			sr := st.Result()
			_ = st.Close()
			if len(sr.ToolCalls) != tc.calls || len(sr.More) != 1 || sr.More[0].Text != "second" || sr.More[0].FinishReason != FinishLength || sr.Text != "" {
				t.Errorf("streamed result %+v", sr)
			}
		})
	}
	if body := string(up.last(t).Body); !strings.Contains(body, `"n":2`) {
		t.Errorf("upstream body %s", body)
	}
}
