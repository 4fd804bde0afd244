package openaiwire

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestContent(t *testing.T) {
	tests := []struct {
		in      string
		want    Content
		wantErr bool
	}{
		{`"hi"`, Content{Text: "hi"}, false},
		{`null`, Content{Null: true}, false},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, Content{Text: "a\nb"}, false},
		{`[{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"see"}]`, Content{Text: "see", NonText: "image_url"}, false},
		{`[]`, Content{}, false},
		{`42`, Content{}, true},
		{`{"text":"x"}`, Content{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var c Content
			err := json.Unmarshal([]byte(tc.in), &c)
			if (err != nil) != tc.wantErr || (err == nil && c != tc.want) {
				t.Fatalf("got %+v, %v; want %+v (error %v)", c, err, tc.want, tc.wantErr)
			}
			if err != nil || tc.want.NonText != "" || len(tc.in) > 0 && tc.in[0] == '[' {
				return
			}
			out, _ := json.Marshal(c)
			if string(out) != tc.in {
				t.Errorf("round trip %s -> %s", tc.in, out)
			}
		})
	}
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
