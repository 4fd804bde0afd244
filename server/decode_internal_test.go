package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
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

func TestDecodeJSON_NamesAreExactAndUnique(t *testing.T) {
	var many strings.Builder
	for i := range 40 {
		fmt.Fprintf(&many, `"p%d":%d,`, i, i)
	}
	for _, tc := range []struct {
		name    string
		newV    func() any
		strict  bool
		body    string
		field   string // the problem's JSON path; "" when the body is valid
		message string
	}{
		// Valid bodies with every kind of field: strings, pointers, enums,
		// nested structs, maps of strings and of structs, free-form values,
		// lists, timestamps, escaped names.
		{"connector with every auth field", newConnector, true, `{"name":"w","displayName":"W","description":"d","baseUrl":"https://x.example","auth":{"type":"oauth2","authorizationUrl":"https://a.example/auth","tokenUrl":"https://a.example/token","clientId":"id","clientSecret":"s","clientAuth":"body","scopes":["a","b"],"grant":"authorization_code","tokenParams":{"audience":"x"},"authorizationParams":{"prompt":"consent"},"redirectUrls":["https://app.example/cb"]}}`, "", ""},
		{"action with parameters, headers and a body template", newAction, true, `{"name":"f","description":"d","method":"POST","path":"/p/{{params.id}}","headers":{"X-A":"1","x-a":"2"},"parameters":{"id":{"type":"string","required":true,"in":"path","description":"d"},"n":{"type":"integer","default":3,"enum":[1,2,3]}},"body":{"q":"{{params.n}}","nested":{"K":1,"k":2},"list":[{"a":1},{"a":2}]},"transformation":"return data","timeoutMs":1000}`, "", ""},
		{"api key with expiry and rate limit", newAPIKey, true, `{"name":"k","scopes":["llm"],"expiresAt":"2030-01-02T15:04:05Z","rateLimit":{"requestsPerMinute":5,"tokensPerMinute":100}}`, "", ""},
		{"run with free-form params", newRun, true, `{"action":"a","connection":"c","params":{"q":"x","Q":"y","n":1.5,"l":[1,"2",null,{"a":{"b":[]}}],"o":{"k":true,"K":false}}}`, "", ""},
		{"function calling with a schema", newFunctions, true, `{"model":"m/x","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}],"temperature":0}`, "", ""},
		{"escaped name that reads exactly", newAPIKey, true, `{"name":"k","sc\u006fpes":["llm"]}`, "", ""},
		{"many distinct params", newRun, true, `{"action":"a","params":{` + many.String() + `"last":0}}`, "", ""},
		{"openai body with unknown fields", newOpenAIChat, false, `{"model":"o/m","messages":[{"role":"user","content":"hi","extra":1}],"metadata":{"a":"b"},"unknown":{"x":[1]}}`, "", ""},

		// Duplicates, at the top and nested.
		{"duplicate top-level key", newAPIKey, true, `{"name":"k","scopes":["llm"],"scopes":["admin"]}`, "scopes", `duplicate key "scopes"`},
		{"duplicate key in auth", newConnector, true, `{"baseUrl":"https://x.example","auth":{"type":"none","type":"apiKey"}}`, "auth.type", `duplicate key "type" at auth.type`},
		{"duplicate param", newRun, true, `{"action":"a","params":{"q":"x","q":"y"}}`, "params.q", `duplicate key "q" at params.q`},
		{"duplicate param through an escape", newRun, true, `{"action":"a","params":{"q":"x","\u0071":"y"}}`, "params.q", `duplicate key "q"`},
		{"duplicate in a free-form value", newRun, true, `{"action":"a","params":{"o":{"a":[{"k":1,"k":2}]}}}`, "params.o.a[0].k", `duplicate key "k"`},
		{"duplicate in a list item", newChat, true, `{"model":"m/x","messages":[{"role":"user","content":"a"},{"role":"user","content":"b","role":"system"}]}`, "messages[1].role", `duplicate key "role" at messages[1].role`},
		{"duplicate in a header map", newAction, true, `{"method":"GET","path":"/","headers":{"X-A":"1","X-A":"2"}}`, "headers.X-A", `duplicate key "X-A"`},
		{"duplicate in a function schema", newFunctions, true, `{"model":"m/x","messages":[],"functions":[{"name":"f","parameters":{"type":"object","type":"array"}}]}`, "functions[0].parameters.type", `duplicate key "type"`},
		{"duplicate after many keys", newRun, true, `{"action":"a","params":{` + many.String() + `"p7":0}}`, "params.p7", `duplicate key "p7"`},
		{"duplicate name with a dot", newRun, true, `{"action":"a","params":{"a.b":1,"a.b":2}}`, `params["a.b"]`, `duplicate key "a.b"`},
		{"duplicate on the OpenAI routes", newOpenAIChat, false, `{"model":"o/m","model":"o/n","messages":[]}`, "model", `duplicate key "model"`},
		{"duplicate inside an OpenAI tool", newOpenAIChat, false, `{"model":"o/m","messages":[],"tools":[{"type":"function","function":{"name":"f","name":"g"}}]}`, "tools[0].function.name", `duplicate key "name"`},

		// Names in another case.
		{"admin smuggled in upper case", newAPIKey, true, `{"name":"k","scopes":["connectors:read"],"SCOPES":["admin"]}`, "SCOPES", `unknown field "SCOPES": field names are case-sensitive; did you mean "scopes"?`},
		{"upper-case object", newConnector, true, `{"baseUrl":"https://x.example","AUTH":{"type":"none"}}`, "AUTH", `unknown field "AUTH"`},
		{"upper-case name in auth", newConnector, true, `{"baseUrl":"https://x.example","auth":{"TYPE":"none"}}`, "auth.TYPE", `unknown field "TYPE" at auth.TYPE`},
		{"wrong case in a parameter", newAction, true, `{"method":"GET","path":"/","parameters":{"city":{"type":"string","Type":"number"}}}`, "parameters.city.Type", `did you mean "type"?`},
		{"wrong case in a message", newChat, true, `{"model":"m/x","messages":[{"role":"user","Content":"hi"}]}`, "messages[0].Content", `unknown field "Content"`},
		{"long s folds to s", newAPIKey, true, `{"name":"k","ſcopes":["admin"]}`, "ſcopes", `did you mean "scopes"?`},
		{"wrong case on the OpenAI routes", newOpenAIChat, false, `{"MODEL":"o/m","messages":[]}`, "MODEL", `did you mean "model"?`},
		{"wrong case after an unknown field", newConnector, true, `{"colour":1,"baseUrl":"https://x.example","auth":{"Type":"none"}}`, "auth.Type", `did you mean "type"?`},

		// Unknown names, with their path.
		{"unknown nested field", newConnector, true, `{"baseUrl":"https://x.example","auth":{"type":"none","colour":1}}`, "auth.colour", `unknown field "colour" at auth.colour`},
		{"a wrong type before an unknown field comes first", newConnector, true, `{"name":5,"baseUrl":"https://x.example","auth":{"type":"none"},"colour":1}`, "name", "field name: expected string"},
		{"an unknown field before a wrong type comes first", newConnector, true, `{"colour":1,"name":5,"baseUrl":"https://x.example","auth":{"type":"none"}}`, "colour", `unknown field "colour"`},
		{"unknown fields are ignored when lenient", newConnector, false, `{"colour":1,"baseUrl":"https://x.example","auth":{"type":"none","shade":2}}`, "", ""},
		{"too deep", newRun, true, `{"action":"a","params":{"l":` + strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1) + `}}`, "", "nested more than 10000 levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := DecodeJSON([]byte(tc.body), tc.newV(), tc.strict)
			if tc.message == "" {
				if err != nil {
					t.Fatalf("err = %v, want the body accepted", err)
				}
				return
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("err = %v, want invalid_request with %q", err, tc.message)
			}
			if tc.field == "" {
				return
			}
			ps, _ := e.Details["problems"].([]errs.Problem)
			if len(ps) != 1 || ps[0].Field != tc.field {
				t.Fatalf("problems = %+v, want one at %s", ps, tc.field)
			}
		})
	}
}

func newConnector() any  { return new(api.ConnectorInput) }
func newAction() any     { return new(api.ActionInput) }
func newAPIKey() any     { return new(api.APIKeyCreate) }
func newRun() any        { return new(api.RunRequest) }
func newChat() any       { return new(api.ChatRequest) }
func newFunctions() any  { return new(api.FunctionCallingRequest) }
func newOpenAIChat() any { return new(openaiwire.ChatCompletionRequest) }

// TestDecodeJSON_ValuesSurviveTheNameCheck: what the check lets through is
// decoded whole, including types that decode themselves.
func TestDecodeJSON_ValuesSurviveTheNameCheck(t *testing.T) {
	var k api.APIKeyCreate
	if err := DecodeJSON([]byte(`{"name":"k","sc\u006fpes":["llm"],"expiresAt":"2030-01-02T15:04:05Z","rateLimit":{"requestsPerMinute":5}}`), &k, true); err != nil {
		t.Fatal(err)
	}
	if k.Name != "k" || len(k.Scopes) != 1 || k.Scopes[0] != "llm" || k.ExpiresAt == nil || k.ExpiresAt.Year() != 2030 || *k.RateLimit.RequestsPerMinute != 5 {
		t.Fatalf("decoded %+v", k)
	}
	var o openaiwire.ChatCompletionRequest
	if err := DecodeJSON([]byte(`{"model":"o/m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tool_choice":{"type":"function","function":{"name":"f"}},"stop":"x"}`), &o, false); err != nil {
		t.Fatal(err)
	}
	if o.Messages[0].Content.Text != "hi" || o.ToolChoice == nil || o.ToolChoice.Name != "f" || len(o.Stop) != 1 {
		t.Fatalf("decoded %+v", o)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// FuzzDecodeJSON holds the fast decoder to encoding/json: whatever goccy
// accepts, encoding/json must accept with the same result, so that the fast
// path never lets through a body the strict decoder refuses. It holds
// checkNames, which runs before either, to namesOracle, an independent
// reading of the names through encoding/json's tokens: a valid JSON body
// is refused for a duplicate, wrong-case or (strict) unknown name exactly
// when the oracle finds one.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"m/x","messages":[{"role":"user","content":"hi"}],"maxTokens":3,"temperature":0.5}`,
		`{"model":"m/x","prompt":"p","stream":true}`,
		`{"name":"c","baseUrl":"https://x.example","auth":{"type":"apiKey","in":"header","name":"X-Key"}}`,
		`{"name":"c","baseUrl":"https://x.example","auth":{"type":"apiKey","TYPE":"none"}}`,
		`{"action":"a","params":{"q":"x","n":1,"l":[1,"2",null],"o":{"k":true}}}`,
		`{"action":"a","params":{"q":"x","q":"y"}}`,
		`{"action":"a","params":{"o":{"k":1,"\u006b":2}}}`,
		`{"name":"k","scopes":["llm"],"expiresAt":"2030-01-02T15:04:05Z"}`,
		`{"name":"k","scopes":["connectors:read"],"SCOPES":["admin"]}`,
		`{"name":"k","scopes":["llm"],"ſcopes":["admin"]}`,
		`{"MODEL":"m/x","Messages":[]}`,
		`{"model":"m/x","model":"m/y"}`,
		`{"model":"\ud800\u00e9\xff"}`,
		"{\"action\":\"a\",\"params\":{\"a\xff\":1,\"a\xfe\":2}}", // both read as "a\ufffd"
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
		if json.Valid(data) {
			refused, unknown := checkNames(data, newV(), strict)
			wantRefused, wantUnknown := namesOracle(data, reflect.TypeOf(newV()), strict)
			if (refused == nil) != (wantRefused == "") || refused == nil && (unknown == nil) != (wantUnknown == "") {
				t.Fatalf("checkNames says %v / %v, the oracle %q / %q, on %q", refused, unknown, wantRefused, wantUnknown, data)
			}
		}
		if DecodeJSON(data, newV(), strict) != nil {
			return
		}
		fast := newV()
		if !fastDecode(data, fast, strict) {
			t.Fatalf("DecodeJSON accepted what goccy refuses: %q", data)
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

// namesOracle reads valid JSON through encoding/json's tokens alongside
// the Go type t and describes the first name checkNames must refuse (a
// duplicate, or a field in another case), and the first unknown field
// (strict); "" for none. It shares no code with checkNames.
func namesOracle(data []byte, t reflect.Type, strict bool) (refused, unknown string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(t reflect.Type, depth int) string
	walk = func(t reflect.Type, depth int) string {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t != nil && (reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]())) {
			t = nil // decodes itself: any value
		}
		tok, err := dec.Token()
		if err != nil {
			panic(err) // valid JSON
		}
		switch tok {
		case json.Delim('{'):
			if depth >= maxJSONDepth {
				return "too deep"
			}
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				name := k.(string)
				if seen[name] {
					return "duplicate " + name
				}
				seen[name] = true
				var child reflect.Type
				switch {
				case t != nil && t.Kind() == reflect.Struct:
					f, exact, folded := oracleField(t, name)
					switch {
					case exact:
						child = f
					case folded:
						return "wrong case " + name
					case strict && unknown == "":
						unknown = strconv.Quote(name) // "" is a name too
					}
				case t != nil && t.Kind() == reflect.Map:
					child = t.Elem()
				}
				if r := walk(child, depth+1); r != "" {
					return r
				}
			}
			_, _ = dec.Token() // }
		case json.Delim('['):
			if depth >= maxJSONDepth {
				return "too deep"
			}
			var item reflect.Type
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8 {
				item = t.Elem()
			}
			for dec.More() {
				if r := walk(item, depth+1); r != "" {
					return r
				}
			}
			_, _ = dec.Token() // ]
		}
		return ""
	}
	return walk(t, 0), unknown
}

// oracleField finds the field of struct t that the JSON name stands for.
func oracleField(t reflect.Type, name string) (typ reflect.Type, exact, folded bool) {
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		n, _, _ := strings.Cut(tag, ",")
		if !f.IsExported() || tag == "-" || f.Anonymous && n == "" {
			continue // an embedded struct's fields are visible themselves
		}
		if n == "" {
			n = f.Name
		}
		if n == name {
			return f.Type, true, false
		}
		folded = folded || strings.EqualFold(n, name)
	}
	return nil, false, folded
}

// BenchmarkDecodeJSON measures DecodeJSON on request bodies of the LLM hot
// path (a short and a long chat) and of the control plane, and (/names)
// the part of it that checkNames takes.
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
		// The share of checkNames in the above.
		b.Run(tc.name+"/names", func(b *testing.B) {
			body, v := []byte(tc.body), tc.newV()
			strict := !strings.HasPrefix(tc.name, "openai")
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if refused, unknown := checkNames(body, v, strict); refused != nil || unknown != nil {
					b.Fatal(refused, unknown)
				}
			}
		})
	}
}
