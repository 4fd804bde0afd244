package responseswire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/responseswire"
)

func TestInput(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     responseswire.Input
		err      string
	}{
		{"a string", `"Hi"`, responseswire.Input{Text: "Hi", IsText: true}, ""},
		{"an easy message", `[{"role":"user","content":"Hi"}]`,
			responseswire.Input{List: []responseswire.Item{{Role: "user", Content: &responseswire.Content{Text: "Hi", IsText: true}}}}, ""},
		{"parts", `[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"low"}]}]`,
			responseswire.Input{List: []responseswire.Item{{Type: "message", Role: "user", Content: &responseswire.Content{List: []responseswire.Part{
				{Type: "input_text", Text: "a"}, {Type: "input_image", ImageURL: "data:image/png;base64,AA==", Detail: "low"}}}}}}, ""},
		{"a function call and its output", `[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}]`,
			responseswire.Input{List: []responseswire.Item{{Type: "function_call", CallID: "c1", Name: "f", Arguments: ptr("{}")},
				{Type: "function_call_output", CallID: "c1", Output: &responseswire.Content{Text: "42", IsText: true}}}}, ""},
		{"null", `null`, responseswire.Input{}, ""},
		{"a number", `42`, responseswire.Input{}, "must be a string or an array"},
		{"content a number", `[{"role":"user","content":1}]`, responseswire.Input{}, "must be a string or an array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got responseswire.Input
			err := json.Unmarshal([]byte(tc.in), &got)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%v %+v", err, got)
			}
			if got.IsText || got.List != nil {
				again := roundTrip(t, got)
				if !reflect.DeepEqual(again, got) {
					t.Errorf("round trip %+v, want %+v", again, got)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func roundTrip(t *testing.T, in responseswire.Input) responseswire.Input {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out responseswire.Input
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out
}

func TestToolChoice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want responseswire.ToolChoice
		err  bool
	}{
		{`"auto"`, responseswire.ToolChoice{Mode: "auto"}, false},
		{`"required"`, responseswire.ToolChoice{Mode: "required"}, false},
		{`{"type":"function","name":"f"}`, responseswire.ToolChoice{Mode: "function", Name: "f"}, false},
		{`{"type":"web_search_preview"}`, responseswire.ToolChoice{Mode: "web_search_preview"}, false},
		{`"sometimes"`, responseswire.ToolChoice{}, true},
		{`7`, responseswire.ToolChoice{}, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var got responseswire.ToolChoice
			err := json.Unmarshal([]byte(tc.in), &got)
			if (err != nil) != tc.err || (!tc.err && got != tc.want) {
				t.Fatalf("%v %+v", err, got)
			}
			if tc.err || (got.Mode != "function" && got.Mode != "auto" && got.Mode != "required") {
				return
			}
			b, _ := json.Marshal(got)
			if string(b) != tc.in {
				t.Errorf("marshalled %s, want %s", b, tc.in)
			}
		})
	}
}

func TestOutputTextHasEmptyAnnotationsAndLogprobs(t *testing.T) {
	b, _ := json.Marshal(responseswire.NewOutputText("hi"))
	if string(b) != `{"type":"output_text","text":"hi","annotations":[],"logprobs":[]}` {
		t.Errorf("%s", b)
	}
}

// FuzzRequest holds the decoder to one rule: a body it accepts has an
// input that survives a round trip through its own encoding.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"Hi"}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}],"tool_choice":{"type":"function","name":"f"}}`,
		`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`,
		`{"input":[{"content":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r responseswire.Request
		if json.Unmarshal(body, &r) != nil {
			return
		}
		if !r.Input.IsText && r.Input.List == nil {
			return
		}
		again := roundTrip(t, r.Input)
		if !reflect.DeepEqual(normalise(again), normalise(r.Input)) {
			t.Fatalf("round trip of %s:\n%+v\n%+v", body, again, r.Input)
		}
	})
}

// normalise makes empty and nil slices alike.
func normalise(in responseswire.Input) string {
	b, _ := json.Marshal(in)
	return string(b)
}
