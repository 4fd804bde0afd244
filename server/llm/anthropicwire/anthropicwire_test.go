package anthropicwire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestContentForms(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Content
		err      string
	}{
		{"a string is one text block", `"Hi"`, Content{TextBlock("Hi")}, ""},
		{"blocks", `[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]`,
			Content{TextBlock("a"), {Type: BlockImage, Source: &ImageSource{Type: SourceURL, URL: "https://x/y.png"}}}, ""},
		{"a tool_result with string content", `[{"type":"tool_result","tool_use_id":"toolu_1","content":"42","is_error":true}]`,
			Content{{Type: BlockToolResult, ToolUseID: "toolu_1", Content: ToolResultText("42"), IsError: true}}, ""},
		{"an unknown name in a block is refused", `[{"type":"text","text":"a","colour":"red"}]`, nil, `unknown field "colour"`},
		{"an unknown name in a tool_result block is refused", `[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a","x":1}]}]`, nil, `unknown field "x"`},
		{"a number", `3`, nil, "must be a string or an array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Content
			err := json.Unmarshal([]byte(tc.in), &c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(c, tc.want) {
				t.Fatalf("got %+v, %v", c, err)
			}
		})
	}
}

func TestBlocksEncodeTheFieldsOfTheirType(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block ContentBlock
		want  string
	}{
		{"an empty text block keeps its text", ContentBlock{Type: BlockText}, `{"type":"text","text":""}`},
		{"tool_use without input sends {}", ContentBlock{Type: BlockToolUse, ID: "toolu_1", Name: "f"}, `{"type":"tool_use","id":"toolu_1","name":"f","input":{}}`},
		{"tool_result string content", ContentBlock{Type: BlockToolResult, ToolUseID: "toolu_1", Content: ToolResultText("ok")}, `{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}`},
		{"base64 image", ContentBlock{Type: BlockImage, Source: &ImageSource{Type: SourceBase64, MediaType: "image/png", Data: "AA=="}}, `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}`},
		{"thinking with its signature", ContentBlock{Type: BlockThinking, Thinking: "hm", Signature: "sig"}, `{"type":"thinking","thinking":"hm","signature":"sig"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.block)
			if err != nil || string(b) != tc.want {
				t.Fatalf("got %s, %v; want %s", b, err, tc.want)
			}
		})
	}
	sys, _ := json.Marshal(SystemText("Be brief."))
	if string(sys) != `"Be brief."` {
		t.Errorf("system %s", sys)
	}
}

// FuzzMessageParam holds decoding and encoding to each other: whatever
// decodes encodes to JSON that decodes to the same value.
func FuzzMessageParam(f *testing.F) {
	for _, s := range []string{
		`{"role":"user","content":"Hi"}`,
		`{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"x"}]}]}`,
		`{"role":"user","content":[{"type":"thinking","thinking":"t","signature":"s"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var m MessageParam
		if json.Unmarshal([]byte(in), &m) != nil {
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			return // e.g. an input that is not valid JSON inside a RawMessage is refused on the way out
		}
		var again MessageParam
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("%s encoded as %s, which does not decode: %v", in, out, err)
		}
		out2, _ := json.Marshal(again)
		if string(out) != string(out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}
