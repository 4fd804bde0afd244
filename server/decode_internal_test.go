package server

import (
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm/openaiwire"
)

// decodeTargets are request bodies of the native API, one of each shape.
var decodeTargets = []func() any{
	func() any { return new(api.ChatRequest) },
	func() any { return new(api.GenerateRequest) },
	func() any { return new(api.FunctionCallingRequest) },
	func() any { return new(api.ConnectorInput) },
	func() any { return new(api.ActionInput) },
	func() any { return new(api.ConnectionInput) },
	func() any { return new(api.RunRequest) },
	func() any { return new(api.APIKeyCreate) },
	func() any { return new(api.WebhookCreate) },
	// The OpenAI-compatible routes decode leniently (unknown fields ignored).
	func() any { return new(openaiwire.ChatCompletionRequest) },
	func() any { return new(openaiwire.CompletionRequest) },
	func() any { return new(openaiwire.EmbeddingRequest) },
}

func TestDecodeJSON(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
		message    string
	}{
		{"valid", `{"model":"m/x","messages":[{"role":"user","content":"hi"}],"maxTokens":3}`, true, ""},
		{"surrounding whitespace", " \n{\"model\":\"m/x\",\"messages\":[]}\t\r\n", true, ""},
		{"trailing data", `{"model":"m/x","messages":[]} {}`, false, "unexpected data after the top-level value"},
		{"trailing garbage", `{"model":"m/x","messages":[]}x`, false, "unexpected data"},
		{"unknown field", `{"model":"m/x","messages":[],"colour":1}`, false, `unknown field "colour"`},
		{"wrong type", `{"model":1,"messages":[]}`, false, "field model: expected string"},
		{"truncated", `{"model":"m/x",`, false, "unexpected end of input at offset 15"},
		{"syntax", `{"model" "m/x"}`, false, "malformed JSON at offset"},
		{"empty", ``, false, "request body is empty"},
		{"only whitespace", " \n\t", false, "request body is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v api.ChatRequest
			err := DecodeJSON([]byte(tc.body), &v, true)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && (errs.KindOf(err) != errs.Invalid || !contains(err.Error(), tc.message)) {
				t.Fatalf("err = %v (%s), want invalid_request with %q", err, errs.KindOf(err), tc.message)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// FuzzDecodeJSON holds the fast decoder to encoding/json: whatever goccy
// accepts, encoding/json must accept with the same result, so that the fast
// path never lets through a body the strict decoder refuses.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"m/x","messages":[{"role":"user","content":"hi"}],"maxTokens":3,"temperature":0.5}`,
		`{"model":"m/x","prompt":"p","stream":true}`,
		`{"name":"c","baseUrl":"https://x.example","auth":{"type":"apiKey","in":"header","name":"X-Key"}}`,
		`{"action":"a","params":{"q":"x","n":1,"l":[1,"2",null],"o":{"k":true}}}`,
		`{"name":"k","scopes":["llm"],"expiresAt":"2030-01-02T15:04:05Z"}`,
		`{"MODEL":"m/x","Messages":[]}`,
		`{"model":"m/x","model":"m/y"}`,
		`{"model":"\ud800\u00e9\xff"}`,
		`{"maxTokens":1e2}`,
		`{"maxTokens":-0}`,
		`[]`, `null`, `{"params":null}`,
		`{"model":"o/m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto","stream_options":{"include_usage":true},"store":false}`,
		`{"model":"o/m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"model":"o/m","prompt":["a","b"],"max_tokens":3}`,
		`{"model":"o/m","input":["a","b"],"encoding_format":"base64","dimensions":8}`,
	} {
		for i := range decodeTargets {
			f.Add(uint8(i), []byte(s))
			f.Add(uint8(128+i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		newV := decodeTargets[int(which)%len(decodeTargets)]
		strict := which < 128 // both modes, for every target
		fast := newV()
		if !fastDecode(data, fast, strict) {
			return
		}
		std := newV()
		if err := stdDecode(data, std, strict); err != nil {
			t.Fatalf("goccy accepted what encoding/json refuses (%v): %q", err, data)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("goccy and encoding/json disagree on %q:\n goccy %+v\n std   %+v", data, fast, std)
		}
	})
}

// BenchmarkDecodeJSON measures DecodeJSON on request bodies of the LLM hot
// path (a short and a long chat) and of the control plane.
//
//	go test ./server -run '^$' -bench 'BenchmarkDecodeJSON' -benchmem -count 5
func BenchmarkDecodeJSON(b *testing.B) {
	var long strings.Builder
	long.WriteString(`{"model":"openai/gpt-4o-mini","temperature":0.2,"maxTokens":512,"messages":[`)
	for i := range 200 {
		if i > 0 {
			long.WriteByte(',')
		}
		long.WriteString(`{"role":"user","content":"Summarise the quarterly report for the northern region, with figures and a short \"outlook\" paragraph."}`)
	}
	long.WriteString(`]}`)
	for _, tc := range []struct {
		name string
		body string
		newV func() any
	}{
		{"chat", `{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"maxTokens":32}`, func() any { return new(api.ChatRequest) }},
		{"chat-long", long.String(), func() any { return new(api.ChatRequest) }},
		{"run", `{"action":"forecast","connection":"default","params":{"q":"Paris","days":3,"units":"metric","extra":{"a":[1,2,3],"b":null}}}`, func() any { return new(api.RunRequest) }},
		{"connector", `{"name":"weather","displayName":"Weather","baseUrl":"https://api.weather.example","auth":{"type":"oauth2","tokenUrl":"https://auth.example/token","clientId":"id","clientSecret":"s","scopes":["a","b"],"grant":"client_credentials","tokenParams":{"audience":"x"}}}`, func() any { return new(api.ConnectorInput) }},
		{"openai-chat", `{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":32,"stream":false,"user":"u1"}`, func() any { return new(openaiwire.ChatCompletionRequest) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			strict := !strings.HasPrefix(tc.name, "openai")
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := DecodeJSON(body, tc.newV(), strict); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
