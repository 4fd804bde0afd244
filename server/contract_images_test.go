package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// tinyPNG is a 1×1 PNG, and tinyPNGURL it as a data: URL.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

const tinyPNGURL = "data:image/png;base64," + tinyPNG

// bodyRecorder is an upstream that answers every request with one fixture
// and keeps the last body it received.
type bodyRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	last []byte
}

func newBodyRecorder(t *testing.T, fixture string) *bodyRecorder {
	answer := llmFixture(t, fixture)
	f := &bodyRecorder{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.last = b
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(f.Close)
	return f
}

// lastBody decodes the last body received into v.
func (f *bodyRecorder) lastBody(t *testing.T, v any) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		t.Fatal("the upstream received nothing")
	}
	if err := json.Unmarshal(f.last, v); err != nil {
		t.Fatalf("upstream body %s: %v", f.last, err)
	}
}

// imagesEnv serves an OpenAI-compatible provider (a vision model and one
// without) and a Gemini provider, each a recording fake.
func imagesEnv(t *testing.T) (env *servertest.Env, key string, oai, gem *bodyRecorder) {
	oai = newBodyRecorder(t, "openai/chat_completion.json")
	gem = newBodyRecorder(t, "gemini/generate.json")
	model := func(name string, caps ...string) config.Model {
		return config.Model{Name: name, Capabilities: caps, MaxTokens: 128000}
	}
	env = servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{
			{Name: "openai", Type: "openai", BaseURL: oai.URL + "/v1", Timeout: config.Duration(5 * time.Second),
				Models: []config.Model{model("gpt-4o", "chat", "vision"), model("gpt-3.5-turbo", "chat")}},
			{Name: "gemini", Type: "gemini", BaseURL: gem.URL + "/v1beta", Timeout: config.Duration(5 * time.Second),
				Models: []config.Model{model("gemini-2.5-flash", "chat", "vision")}},
		}
	})
	key = createKey(t, env.Client(t), "images", []client.Scope{client.ScopeLLM}, nil).Key
	return env, key, oai, gem
}

// imageChat is a chat request whose user message is the given parts.
func imageChat(model string, parts ...string) string {
	return `{"model":"` + model + `","messages":[{"role":"system","content":"Describe images."},{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
}

func textPart(s string) string { return `{"type":"text","text":"` + s + `"}` }

func imageURLPart(url, detail string) string {
	d := ""
	if detail != "" {
		d = `,"detail":"` + detail + `"`
	}
	return `{"type":"image_url","image_url":{"url":"` + url + `"` + d + `}}`
}

func TestContractImages(t *testing.T) {
	env, key, oai, gem := imagesEnv(t)
	hc := env.HTTPClient(t, servertest.WithKey(key))
	post := func(t *testing.T, body string) (int, []byte) {
		t.Helper()
		resp, err := hc.Post(env.URL+"/openai/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	t.Run("an OpenAI-compatible upstream gets image_url parts", func(t *testing.T) {
		status, b := post(t, imageChat("openai/gpt-4o", textPart("What is in these?"), imageURLPart(tinyPNGURL, "low"), imageURLPart("https://images.example/cat.png?sig=abc", "")))
		if status != 200 {
			t.Fatalf("%d %s", status, b)
		}
		var up struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		oai.lastBody(t, &up)
		if string(up.Messages[0].Content) != `"Describe images."` {
			t.Errorf("system content %s", up.Messages[0].Content)
		}
		var parts []map[string]any
		if err := json.Unmarshal(up.Messages[1].Content, &parts); err != nil {
			t.Fatalf("user content %s is not an array of parts", up.Messages[1].Content)
		}
		want := []map[string]any{
			{"type": "text", "text": "What is in these?"},
			{"type": "image_url", "image_url": map[string]any{"url": tinyPNGURL, "detail": "low"}},
			{"type": "image_url", "image_url": map[string]any{"url": "https://images.example/cat.png?sig=abc"}},
		}
		if g, _ := json.Marshal(parts); string(g) != jsonText(want) {
			t.Errorf("parts\n got %s\nwant %s", g, jsonText(want))
		}
	})
	t.Run("a Gemini upstream gets inline_data", func(t *testing.T) {
		status, b := post(t, imageChat("gemini/gemini-2.5-flash", textPart("What is this?"), imageURLPart(tinyPNGURL, "")))
		if status != 200 {
			t.Fatalf("%d %s", status, b)
		}
		var up struct {
			Contents []struct {
				Role  string           `json:"role"`
				Parts []map[string]any `json:"parts"`
			} `json:"contents"`
		}
		gem.lastBody(t, &up)
		want := []map[string]any{
			{"text": "What is this?"},
			{"inline_data": map[string]any{"mime_type": "image/png", "data": tinyPNG}},
		}
		if len(up.Contents) != 1 || jsonText(up.Contents[0].Parts) != jsonText(want) {
			t.Errorf("contents %+v", up.Contents)
		}
	})

	type openAIError struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	refusals := []struct {
		name, body, param, contains string
	}{
		{"a model without vision", imageChat("openai/gpt-3.5-turbo", imageURLPart(tinyPNGURL, "")), "", "does not support vision"},
		{"an http URL", imageChat("openai/gpt-4o", textPart("x"), imageURLPart("http://images.example/cat.png", "")), "messages[1].content[1]", `"http" URL`},
		{"an SVG data: URL", imageChat("openai/gpt-4o", imageURLPart("data:image/svg+xml;base64,PHN2Zz4=", "")), "messages[1].content[0]", `"image/svg+xml"`},
		{"bad base64", imageChat("openai/gpt-4o", imageURLPart("data:image/png;base64,@@@@", "")), "messages[1].content[0]", "not valid base64"},
		{"an image without a url", imageChat("openai/gpt-4o", `{"type":"image_url","image_url":{}}`), "messages[1].content[0].image_url.url", "is required"},
		{"audio parts", imageChat("openai/gpt-4o", textPart("x"), `{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`), "messages[1].content[1].type", `"input_audio"`},
		{"an image in an assistant message", `{"model":"openai/gpt-4o","messages":[{"role":"assistant","content":[` + imageURLPart(tinyPNGURL, "") + `]},{"role":"user","content":"hi"}]}`,
			"messages[0].content[0].type", "only accepted in user messages"},
	}
	for _, tc := range refusals {
		t.Run("400 for "+tc.name, func(t *testing.T) {
			status, b := post(t, tc.body)
			var e openAIError
			_ = json.Unmarshal(b, &e)
			if status != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.contains) {
				t.Fatalf("%d %s", status, b)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param %v, want %s", e.Error.Param, tc.param)
			}
		})
	}
	t.Run("a fetch to a loopback address is refused by the egress guard", func(t *testing.T) {
		status, b := post(t, imageChat("gemini/gemini-2.5-flash", imageURLPart("https://127.0.0.1:1/cat.png", "")))
		var e openAIError
		_ = json.Unmarshal(b, &e)
		if status != 403 || e.Error.Param == nil || *e.Error.Param != "messages[1].content[0]" || !strings.Contains(e.Error.Message, "egress denied") {
			t.Fatalf("%d %s", status, b)
		}
	})
}

func TestContractImagesOpenAISDK(t *testing.T) {
	env, key, oai, _ := imagesEnv(t)
	c := sdk(t, env, key)
	res, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model: "openai/gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is this?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: tinyPNGURL, Detail: "high"}),
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "Hello! How can I assist you today?" {
		t.Errorf("completion %s", res.RawJSON())
	}
	var up struct {
		Messages []struct {
			Content []struct {
				Type     string `json:"type"`
				ImageURL struct {
					URL, Detail string
				} `json:"image_url"`
			} `json:"content"`
		} `json:"messages"`
	}
	oai.lastBody(t, &up)
	if p := up.Messages[0].Content; len(p) != 2 || p[1].Type != "image_url" || p[1].ImageURL.URL != tinyPNGURL || p[1].ImageURL.Detail != "high" {
		t.Errorf("upstream parts %+v", p)
	}

	_, err = c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model: "openai/gpt-3.5-turbo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: tinyPNGURL}),
		})},
	})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || !strings.Contains(e.Message, "does not support vision") {
		t.Fatalf("want a 400 naming the capability, got %v", err)
	}
}

// jsonText is v as compact JSON.
func jsonText(v any) string { return string(mustJSON(v)) }
