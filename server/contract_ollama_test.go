package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks/webhooktest"
)

// fakeOllamaServer is an Ollama server as Switchboard sees it through an
// `openai`-type provider at <url>/v1: its OpenAI layer (model list, chat
// completions, embeddings) and the native /api/version and /api/show,
// answering in Ollama's wire format (show answers from
// server/llm/testdata/ollama). It records the model names it was asked for.
type fakeOllamaServer struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string // "<path> <model>"
}

func newFakeOllamaServer(t *testing.T) *fakeOllamaServer {
	f := &fakeOllamaServer{}
	shows := map[string][]byte{
		"tiny:latest":             llmFixture(t, "ollama/show_tiny.json"),
		"nomic-embed-text:latest": llmFixture(t, "ollama/show_nomic-embed-text.json"),
		"llava:7b":                llmFixture(t, "ollama/show_llava.json"),
		"acme/search-encoder:q8":  llmFixture(t, "ollama/show_acme-search-encoder.json"),
		"legacy-embed:latest":     llmFixture(t, "ollama/show_legacy-embed.json"),
	}
	models := llmFixture(t, "ollama/models.json")
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		var body struct {
			Model string `json:"model"`
		}
		if r.Method == http.MethodPost {
			_ = json.NewDecoder(r.Body).Decode(&body)
			f.mu.Lock()
			f.asked = append(f.asked, r.URL.Path+" "+body.Model)
			f.mu.Unlock()
		}
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/models":
			_, _ = w.Write(models)
		case "GET /api/version":
			_, _ = w.Write([]byte(`{"version":"0.12.6"}`))
		case "POST /api/show":
			b, ok := shows[body.Model]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":"model '` + body.Model + `' not found"}`))
				return
			}
			_, _ = w.Write(b)
		case "POST /v1/chat/completions":
			_ = json.NewEncoder(w).Encode(map[string]any{
				"id": "chatcmpl-412", "object": "chat.completion", "created": 1764000000, "model": body.Model, "system_fingerprint": "fp_ollama",
				"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": "Hi there."}, "finish_reason": "stop"}},
				"usage":   map[string]int{"prompt_tokens": 26, "completion_tokens": 4, "total_tokens": 30},
			})
		case "POST /v1/embeddings":
			vec := make([]float64, 768)
			for i := range vec {
				vec[i] = float64(i%7) / 10
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"object": "list", "model": body.Model,
				"data":  []map[string]any{{"object": "embedding", "embedding": vec, "index": 0}},
				"usage": map[string]int{"prompt_tokens": 4, "total_tokens": 4},
			})
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`404 page not found`))
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// lastAsked is the last "<path> <model>" the fake received on path.
func (f *fakeOllamaServer) lastAsked(path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.asked) - 1; i >= 0; i-- {
		if strings.HasPrefix(f.asked[i], path+" ") {
			return f.asked[i]
		}
	}
	return ""
}

// TestContractOllama runs the server with discovery against an Ollama and
// uses its models as Ollama's users name them: untagged, through the
// OpenAI SDK and the native API, with capabilities from /api/show.
func TestContractOllama(t *testing.T) {
	up := newFakeOllamaServer(t)
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{{Name: "ollama", Type: "openai", BaseURL: up.URL + "/v1", Discover: true, Timeout: config.Duration(5 * time.Second)}}
	})
	cat := env.Server.LLM().Catalog
	webhooktest.WaitFor(t, "the first discovery", 30*time.Second, func() bool {
		m, err := cat.Lookup("ollama/llava:7b")
		return err == nil && m.Has("vision")
	})
	key := createKey(t, env.Client(t), "ollama", []client.Scope{client.ScopeLLM}, nil).Key
	sdk := sdk(t, env, key)
	c := env.ClientWithKey(t, key)

	t.Run("chat with an untagged model", func(t *testing.T) {
		res, err := sdk.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
			Model:    "ollama/tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Model != "ollama/tiny:latest" || res.Choices[0].Message.Content != "Hi there." || res.Usage.TotalTokens != 30 {
			t.Errorf("completion %s", res.RawJSON())
		}
		if got := up.lastAsked("/v1/chat/completions"); got != "/v1/chat/completions tiny:latest" {
			t.Errorf("Ollama was asked %q", got)
		}
	})
	t.Run("embeddings with an untagged model", func(t *testing.T) {
		res, err := sdk.Embeddings.New(bg, openai.EmbeddingNewParams{
			Model: "ollama/nomic-embed-text",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("search query: ollama")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Model != "ollama/nomic-embed-text:latest" || len(res.Data) != 1 || len(res.Data[0].Embedding) != 768 {
			t.Errorf("embeddings of %s: %d vectors", res.Model, len(res.Data))
		}
		if got := up.lastAsked("/v1/embeddings"); got != "/v1/embeddings nomic-embed-text:latest" {
			t.Errorf("Ollama was asked %q", got)
		}
	})
	t.Run("a model by its untagged id", func(t *testing.T) {
		res, err := c.GetProviderModelWithResponse(bg, "ollama", "tiny")
		if err != nil {
			t.Fatal(err)
		}
		m := res.JSON200
		if m == nil {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
		if m.Id != "ollama/tiny:latest" || m.Name != "tiny:latest" || !slices.Equal(m.Capabilities, []string{"chat"}) || m.MaxTokens == nil || *m.MaxTokens != 131072 {
			t.Errorf("model %s", res.Body)
		}
		compat, err := sdk.Models.Get(bg, "ollama/tiny")
		if err != nil || compat.ID != "ollama/tiny:latest" || compat.OwnedBy != "ollama" {
			t.Errorf("/openai/v1/models/ollama/tiny: %v %+v", err, compat)
		}
	})
	t.Run("capabilities as Ollama reports them", func(t *testing.T) {
		res, err := c.ListModelsWithResponse(bg, &client.ListModelsParams{Provider: ptr("ollama")})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("%v %s", err, res.Body)
		}
		got := map[string]string{}
		for _, m := range res.JSON200.Data {
			s := strings.Join(m.Capabilities, ",")
			if m.Dimensions != nil {
				s += " dimensions " + strconv.Itoa(*m.Dimensions)
			}
			got[m.Id] = s
		}
		want := map[string]string{
			"ollama/tiny:latest":             "chat",
			"ollama/nomic-embed-text:latest": "embeddings dimensions 768",
			"ollama/llava:7b":                "chat,vision",
			"ollama/acme/search-encoder:q8":  "embeddings dimensions 1024",
			"ollama/broken:latest":           "chat",
			"ollama/legacy-embed:latest":     "embeddings dimensions 384",
		}
		if js(got) != js(want) {
			t.Errorf("models\n got %s\nwant %s", js(got), js(want))
		}
	})
	t.Run("an untagged name without a latest tag is a 404 naming the tags", func(t *testing.T) {
		res, err := c.GetProviderModelWithResponse(bg, "ollama", "llava")
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON404 == nil || res.JSON404.Error.Code != "not_found" || !strings.Contains(res.JSON404.Error.Message, "ollama/llava:7b") {
			t.Errorf("%d %s", res.StatusCode(), res.Body)
		}
		_, err = sdk.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "ollama/llava", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "model_not_found" || e.Param != "model" || !strings.Contains(e.Message, "ollama/llava:7b") || !strings.Contains(e.Message, ":latest") {
			t.Errorf("chat with ollama/llava: %v", err)
		}
	})
}
