package openaiwire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func TestContent(t *testing.T) {
	img := func(url, detail string) ContentPart {
		return ContentPart{Type: "image_url", ImageURL: &ImageURL{URL: url, Detail: detail}}
	}
	tests := []struct {
		name    string
		in      string
		want    Content
		wantErr bool
	}{
		{"string", `"hi"`, Content{Text: "hi"}, false},
		{"null", `null`, Content{Null: true}, false},
		{"text parts", `[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, Content{Text: "a\nb"}, false},
		{"image then text", `[{"type":"image_url","image_url":{"url":"https://x.test/a.png","detail":"low"}},{"type":"text","text":"see"}]`,
			Content{Text: "see", Parts: []ContentPart{img("https://x.test/a.png", "low"), {Type: "text", Text: "see"}}}, false},
		{"text, image, text", `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"b"}]`,
			Content{Text: "a\nb", Parts: []ContentPart{{Type: "text", Text: "a"}, img("data:image/png;base64,AAAA", ""), {Type: "text", Text: "b"}}}, false},
		{"audio refused by name and index", `[{"type":"text","text":"a"},{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]`,
			Content{Text: "a", NonText: "input_audio", NonTextIndex: 1}, false},
		{"file after an image", `[{"type":"image_url","image_url":{"url":"u"}},{"type":"file","file":{}}]`,
			Content{NonText: "file", NonTextIndex: 1, Parts: []ContentPart{img("u", ""), {Type: "file"}}}, false},
		{"part without a type", `[{"text":"a"}]`, Content{NonText: MissingType}, false},
		{"empty array", `[]`, Content{}, false},
		{"number", `42`, Content{}, true},
		{"object", `{"text":"x"}`, Content{}, true},
		{"image_url not an object", `[{"type":"image_url","image_url":"https://x.test"}]`, Content{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Content
			err := json.Unmarshal([]byte(tc.in), &c)
			if (err != nil) != tc.wantErr || (err == nil && !reflect.DeepEqual(c, tc.want)) {
				t.Fatalf("got %+v, %v; want %+v (error %v)", c, err, tc.want, tc.wantErr)
			}
			if err != nil || tc.want.NonText != "" || (tc.in[0] == '[' && tc.want.Parts == nil) {
				return
			}
			out, _ := json.Marshal(c)
			if string(out) != tc.in {
				t.Errorf("round trip %s -> %s", tc.in, out)
			}
		})
	}
}

func FuzzContent(f *testing.F) {
	for _, s := range []string{`"hi"`, `null`, `[{"type":"text","text":"a"}]`, `[{"type":"image_url","image_url":{"url":"https://x.test/a.png"}}]`, `[{"type":"file"}]`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var c Content
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode %+v: %v", in, c, err)
		}
		var again Content
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if again.Text != c.Text || len(again.Parts) != len(c.Parts) {
			t.Fatalf("%q -> %s -> %+v, want %+v", in, out, again, c)
		}
	})
}

func TestStringList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    StringList
		wantErr bool
	}{
		{`"one"`, StringList{"one"}, false},
		{`["a","b"]`, StringList{"a", "b"}, false},
		{`null`, nil, false},
		{`[1,2]`, nil, true},
		{`[[1,2]]`, nil, true},
		{`7`, nil, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var s StringList
			err := json.Unmarshal([]byte(tc.in), &s)
			if (err != nil) != tc.wantErr || !slices.Equal(s, tc.want) {
				t.Fatalf("got %v, %v", s, err)
			}
		})
	}
}

func TestToolChoice(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    ToolChoice
		wantErr bool
	}{
		{`"auto"`, ToolChoice{Mode: "auto"}, false},
		{`"none"`, ToolChoice{Mode: "none"}, false},
		{`"required"`, ToolChoice{Mode: "required"}, false},
		{`{"type":"function","function":{"name":"f"}}`, ToolChoice{Mode: "function", Name: "f"}, false},
		{`"sometimes"`, ToolChoice{}, true},
		{`{"type":"function"}`, ToolChoice{}, true},
		{`{"type":"custom","custom":{"name":"f"}}`, ToolChoice{}, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var c ToolChoice
			err := json.Unmarshal([]byte(tc.in), &c)
			if (err != nil) != tc.wantErr || c != tc.want {
				t.Fatalf("got %+v, %v", c, err)
			}
			if err == nil {
				out, _ := json.Marshal(c)
				var back ToolChoice
				if json.Unmarshal(out, &back) != nil || back != c {
					t.Errorf("round trip %s -> %s", tc.in, out)
				}
			}
		})
	}
}

func TestEmbeddingInput(t *testing.T) {
	for _, tc := range []struct {
		in      string
		texts   []string
		tokens  [][]int
		wantErr bool
	}{
		{`"a"`, []string{"a"}, nil, false},
		{`["a","b"]`, []string{"a", "b"}, nil, false},
		{`[1,2,3]`, nil, [][]int{{1, 2, 3}}, false},
		{`[[1,2],[3]]`, nil, [][]int{{1, 2}, {3}}, false},
		{`[]`, []string{}, nil, false},
		{`[-1]`, nil, nil, true},
		{`[[1],["a"]]`, nil, nil, true},
		{`[1,"a"]`, nil, nil, true},
		{`["a",1]`, nil, nil, true},
		{`[1.5]`, nil, nil, true},
		{`{"a":1}`, nil, nil, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var in EmbeddingInput
			err := json.Unmarshal([]byte(tc.in), &in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v", err)
			}
			if err != nil {
				return
			}
			if fmt.Sprint(in.Texts) != fmt.Sprint(tc.texts) || fmt.Sprint(in.Tokens) != fmt.Sprint(tc.tokens) || (in.Tokens == nil) != (tc.tokens == nil) {
				t.Errorf("got %+v", in)
			}
			out, _ := json.Marshal(in)
			var back EmbeddingInput
			if json.Unmarshal(out, &back) != nil || fmt.Sprint(back) != fmt.Sprint(in) {
				t.Errorf("round trip %s -> %s", tc.in, out)
			}
		})
	}
}

func FuzzEmbeddingInput(f *testing.F) {
	for _, s := range []string{`"a"`, `["a","b"]`, `[1,2]`, `[[1],[2,3]]`, `[]`, `[[]]`, `null`, `[-1]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var in EmbeddingInput
		if json.Unmarshal([]byte(s), &in) != nil {
			return
		}
		if in.Texts != nil && in.Tokens != nil {
			t.Fatalf("%q decoded to both texts and tokens", s)
		}
		for _, ids := range in.Tokens {
			for _, id := range ids {
				if id < 0 {
					t.Fatalf("%q decoded to a negative token id", s)
				}
			}
		}
		out, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var back EmbeddingInput
		if err := json.Unmarshal(out, &back); err != nil || fmt.Sprint(back) != fmt.Sprint(in) {
			t.Fatalf("%q: round trip %s -> %+v, %v", s, out, back, err)
		}
	})
}

func TestChatCompletionRequestExtra(t *testing.T) {
	r := ChatCompletionRequest{Model: "m", Messages: []Message{{Role: "user", Content: Text("hi")}},
		Extra: map[string]json.RawMessage{"top_k": json.RawMessage(`40`), "logprobs": json.RawMessage(`true`)}}
	out, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_k":40}`; string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	var empty CompletionRequest
	if out, _ := json.Marshal(empty); string(out) != `{"model":"","prompt":null}` {
		t.Errorf("empty completion request %s", out)
	}
}
