package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// ollamaShows maps a model name to the fixture Ollama's POST /api/show
// answers for it; broken:latest fails with a 500 and other names are 404s,
// as Ollama answers them.
var ollamaShows = map[string]string{
	"tiny:latest":             "ollama/show_tiny.json",
	"nomic-embed-text:latest": "ollama/show_nomic-embed-text.json",
	"llava:7b":                "ollama/show_llava.json",
	"acme/search-encoder:q8":  "ollama/show_acme-search-encoder.json",
	"legacy-embed:latest":     "ollama/show_legacy-embed.json",
}

// fakeOllama is an Ollama server: its OpenAI layer under /v1 (the model
// list, chat completions, embeddings) and the native /api/version and
// /api/show, in Ollama's exact wire format. show, when set, runs before
// every /api/show answer.
type fakeOllama struct {
	*fake
	show     func(model string)
	inFlight atomic.Int32
	maxShows atomic.Int32
}

func newFakeOllama(t *testing.T) *fakeOllama {
	t.Helper()
	f := &fakeOllama{}
	shows := map[string][]byte{}
	for name, file := range ollamaShows {
		shows[name] = fixture(t, file)
	}
	showError, toolsRefused := fixture(t, "ollama/show_error.json"), fixture(t, "ollama/chat_tools_unsupported.json")
	f.fake = newFake(t, map[string]http.HandlerFunc{
		"GET /v1/models":   serve(t, "ollama/models.json", 200),
		"GET /api/version": serve(t, "ollama/version.json", 200),
		"POST /api/show": func(w http.ResponseWriter, r *http.Request) {
			n := f.inFlight.Add(1)
			defer f.inFlight.Add(-1)
			for m := f.maxShows.Load(); n > m && !f.maxShows.CompareAndSwap(m, n); m = f.maxShows.Load() {
			}
			var body struct {
				Model string `json:"model"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			if f.show != nil {
				f.show(body.Model)
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			b, ok := shows[body.Model]
			switch {
			case body.Model == "broken:latest":
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(showError)
			case !ok:
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":"model '` + body.Model + `' not found"}`))
			default:
				_, _ = w.Write(b)
			}
		},
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Model string            `json:"model"`
				Tools []json.RawMessage `json:"tools"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			if len(body.Tools) > 0 && body.Model == "llava:7b" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(toolsRefused)
				return
			}
			serve(t, "openai/chat_completion.json", 200)(w, r)
		},
		"POST /v1/embeddings": serve(t, "openai/embeddings.json", 200),
	})
	return f
}

// shows lists the models asked about through /api/show, sorted.
func (f *fakeOllama) shows(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range f.requests() {
		if r.Path == "/api/show" {
			var body map[string]string
			if err := json.Unmarshal(r.Body, &body); err != nil || len(body) != 1 {
				t.Fatalf("/api/show body %s: want exactly {\"model\": name}", r.Body)
			}
			out = append(out, body["model"])
		}
	}
	slices.Sort(out)
	return out
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// discoveringCatalog builds a catalog over providers, with a logger
// writing to the returned buffer, and runs one discovery.
func discoveringCatalog(t *testing.T, providers ...config.Provider) (*Catalog, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	cat, err := NewCatalog(context.Background(), providers, CatalogOptions{Logger: slog.New(slog.NewTextHandler(logs, nil)), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cat, logs
}

func discovering(name, baseURL string, models ...config.Model) config.Provider {
	return config.Provider{Name: name, Type: TypeOpenAI, BaseURL: baseURL, Discover: true, Timeout: config.Duration(5 * time.Second), Models: models}
}

// TestOllamaDiscovery_CapabilitiesFromTheRuntime checks that discovered
// Ollama models take their capabilities and lengths from /api/show, and
// their names only when Ollama reports nothing.
func TestOllamaDiscovery_CapabilitiesFromTheRuntime(t *testing.T) {
	up := newFakeOllama(t)
	cat, _ := discoveringCatalog(t, discovering("ollama", up.URL+"/v1"))
	tests := []struct {
		name       string
		id         string
		caps       []string
		maxTokens  int
		dimensions int
	}{
		{"a chat model with tools: chat, its context length from llama.context_length", "ollama/tiny:latest", []string{CapChat}, 131072, 0},
		{"an embedding model: its vector length from nomic-bert.embedding_length", "ollama/nomic-embed-text:latest", []string{CapEmbeddings}, 2048, 768},
		{"a vision model whose name says nothing of it", "ollama/llava:7b", []string{CapChat, CapVision}, 32768, 0},
		{"an embedding model whose name says nothing of it", "ollama/acme/search-encoder:q8", []string{CapEmbeddings}, 512, 1024},
		{"a failing /api/show falls back to the name", "ollama/broken:latest", []string{CapChat}, 0, 0},
		{"an Ollama reporting no capabilities (before 0.6.4) falls back to the name, lengths still read", "ollama/legacy-embed:latest", []string{CapEmbeddings}, 512, 384},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := cat.Lookup(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Discovered || !slices.Equal(m.Capabilities, tt.caps) || m.MaxTokens != tt.maxTokens || m.Dimensions != tt.dimensions {
				t.Errorf("%s: capabilities %v, maxTokens %d, dimensions %d; want %v, %d, %d", m.ID, m.Capabilities, m.MaxTokens, m.Dimensions, tt.caps, tt.maxTokens, tt.dimensions)
			}
		})
	}
	t.Run("one /api/show per model, with the name as listed", func(t *testing.T) {
		want := []string{"acme/search-encoder:q8", "broken:latest", "legacy-embed:latest", "llava:7b", "nomic-embed-text:latest", "tiny:latest"}
		if got := up.shows(t); !slices.Equal(got, want) {
			t.Errorf("/api/show asked about %v, want %v", got, want)
		}
	})
}

// TestOllamaDiscovery_Bounded checks that /api/show calls run at most
// ollamaShowConcurrency at once, and that a discovery whose deadline
// passes keeps the models, those not described guessed from their names.
func TestOllamaDiscovery_Bounded(t *testing.T) {
	t.Run("at most ollamaShowConcurrency calls at once", func(t *testing.T) {
		up := newFakeOllama(t)
		up.show = func(string) { time.Sleep(20 * time.Millisecond) }
		discoveringCatalog(t, discovering("ollama", up.URL+"/v1"))
		if n := up.maxShows.Load(); n < 2 || n > ollamaShowConcurrency {
			t.Errorf("%d /api/show calls ran at once, want 2..%d", n, ollamaShowConcurrency)
		}
	})
	t.Run("the discovery deadline bounds them", func(t *testing.T) {
		up := newFakeOllama(t)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		up.show = func(model string) {
			if model == "llava:7b" {
				<-release
			}
		}
		logs := &lockedBuffer{}
		cat, err := NewCatalog(context.Background(), []config.Provider{discovering("ollama", up.URL+"/v1")}, CatalogOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := cat.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("discovery took %s past its 300ms deadline", d)
		}
		if m, err := cat.Lookup("ollama/llava:7b"); err != nil || !slices.Equal(m.Capabilities, []string{CapChat}) {
			t.Errorf("the model whose /api/show outlived the deadline: %+v, %v; want it guessed from its name (chat)", m, err)
		}
		if m, err := cat.Lookup("ollama/acme/search-encoder:q8"); err != nil || !m.Has(CapEmbeddings) {
			t.Errorf("a model described in time: %+v, %v", m, err)
		}
		if !strings.Contains(logs.String(), "model=llava:7b") {
			t.Errorf("the timed-out model is not logged:\n%s", logs)
		}
	})
}

// TestOllamaDiscovery_FailureLoggedOnce checks that a model whose
// /api/show keeps failing is logged once, not at every refresh, and again
// after it recovered and failed anew.
func TestOllamaDiscovery_FailureLoggedOnce(t *testing.T) {
	up := newFakeOllama(t)
	var fail atomic.Bool
	fail.Store(true)
	up.show = func(model string) {
		if model == "tiny:latest" && fail.Load() {
			panic(http.ErrAbortHandler) // the connection drops
		}
	}
	cat, logs := discoveringCatalog(t, discovering("ollama", up.URL+"/v1"))
	count := func() int { return strings.Count(logs.String(), "model=tiny:latest") }
	steps := []struct {
		name    string
		failing bool
		want    int
	}{
		{"a second failing refresh logs nothing new", true, 1},
		{"a recovered model logs nothing", false, 1},
		{"a new failure is logged again", true, 2},
	}
	if n := count(); n != 1 {
		t.Fatalf("the first failure is logged %d times, want 1:\n%s", n, logs)
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			fail.Store(st.failing)
			if err := cat.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := count(); n != st.want {
				t.Errorf("logged %d times, want %d:\n%s", n, st.want, logs)
			}
			m, _ := cat.Lookup("ollama/tiny:latest")
			if wantMax := map[bool]int{true: 0, false: 131072}[st.failing]; m == nil || m.MaxTokens != wantMax {
				t.Errorf("model %+v, want maxTokens %d", m, wantMax)
			}
		})
	}
	if strings.Count(logs.String(), "provider is Ollama") != 1 {
		t.Errorf("the detection is logged other than once:\n%s", logs)
	}
}

// TestOpenAICompatibleDiscovery_NotOllama checks that nothing changes for
// an OpenAI-compatible server that is not Ollama (vLLM): no /api/show, and
// capabilities from the name as before.
func TestOpenAICompatibleDiscovery_NotOllama(t *testing.T) {
	tests := []struct {
		name     string
		version  http.HandlerFunc // GET /api/version; nil: a 404
		basePath string
		probes   int
	}{
		{"vLLM: /api/version is a 404", nil, "/v1", 1},
		{"a server answering /api/version in another shape", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"build":"b4567"}`))
		}, "/v1", 1},
		{"a base URL not ending in /v1 is not probed", nil, "/openai", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			routes := map[string]http.HandlerFunc{
				"GET /v1/models":     serve(t, "openai/models.json", 200),
				"GET /openai/models": serve(t, "openai/models.json", 200),
			}
			if tt.version != nil {
				routes["GET /api/version"] = tt.version
			}
			up := newFake(t, routes)
			cat, logs := discoveringCatalog(t, discovering("vllm", up.URL+tt.basePath))
			want := map[string][]string{"vllm/gpt-4o-mini": {CapChat}, "vllm/text-embedding-3-small": {CapEmbeddings}, "vllm/Qwen/Qwen2.5-7B-Instruct": {CapChat}}
			for id, caps := range want {
				if m, err := cat.Lookup(id); err != nil || !slices.Equal(m.Capabilities, caps) {
					t.Errorf("%s: %+v, %v; want %v", id, m, err, caps)
				}
			}
			if m, _ := cat.Lookup("vllm/Qwen/Qwen2.5-7B-Instruct"); m == nil || m.MaxTokens != 32768 {
				t.Errorf("vLLM's max_model_len is not read: %+v", m)
			}
			probes := 0
			for _, r := range up.requests() {
				switch r.Path {
				case "/api/show":
					t.Errorf("asked a non-Ollama server %s %s", r.Method, r.Path)
				case "/api/version":
					probes++
				}
			}
			if probes != tt.probes {
				t.Errorf("%d probes of /api/version, want %d", probes, tt.probes)
			}
			if strings.Contains(logs.String(), "Ollama") {
				t.Errorf("logged about Ollama:\n%s", logs)
			}
		})
	}
}

// TestOllamaRefusesToolsToAModelWithout checks the decision not to have a
// tools capability: Ollama refuses tools to a model without them, and the
// caller gets that refusal as a 400 naming the model.
func TestOllamaRefusesToolsToAModelWithout(t *testing.T) {
	up := newFakeOllama(t)
	cat, _ := discoveringCatalog(t, discovering("ollama", up.URL+"/v1"))
	g := &Gateway{Catalog: cat, Usage: &memRecorder{}, Log: quietLog}
	r := toolRequest("ollama/llava:7b")
	_, err := g.Complete(context.Background(), OpCompatChat, r)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid || !strings.Contains(e.Message, "llava:7b does not support tools") {
		t.Fatalf("err %v, want a 400 passing on Ollama's refusal", err)
	}
	if got := up.last(t); got.Path != "/v1/chat/completions" || !strings.Contains(string(got.Body), `"model":"llava:7b"`) {
		t.Errorf("sent %s %s", got.Path, got.Body)
	}
}
