package openaiwire

import (
	"encoding/json"
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
