package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// TestModelCostIsExactDecimal checks that a known price times a token
// count gives the exact decimal, not float noise.
func TestModelCostIsExactDecimal(t *testing.T) {
	tests := []struct {
		name    string
		pricing *Pricing
		u       Usage
		want    string // as encoding/json writes it
	}{
		{"470 prompt tokens at $0.15 per million", &Pricing{Input: 0.15, Output: 0.60}, Usage{PromptTokens: 470}, "0.0000705"},
		{"prompt and completion", &Pricing{Input: 0.15, Output: 0.60}, Usage{PromptTokens: 19, CompletionTokens: 10}, "0.00000885"},
		{"four-decimal price", &Pricing{Input: 0.0375, Output: 0.3}, Usage{PromptTokens: 333, CompletionTokens: 7}, "0.0000145875"},
		{"a million tokens cost the price", &Pricing{Input: 2.5, Output: 10}, Usage{PromptTokens: 1e6, CompletionTokens: 1e6}, "12.5"},
		{"no pricing is free", nil, Usage{PromptTokens: 470}, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Model{Pricing: tt.pricing}
			if b, _ := json.Marshal(m.Cost(tt.u)); string(b) != tt.want {
				t.Fatalf("Cost(%+v) encodes as %s, want %s", tt.u, b, tt.want)
			}
		})
	}
}

// TestParseOllamaName checks Ollama's name grammar and defaults as
// types/model/name.go in github.com/ollama/ollama writes them.
func TestParseOllamaName(t *testing.T) {
	tests := []struct {
		in        string
		base, tag string
		ok        bool
		canonical string
	}{
		{"tiny", "tiny", "", true, "tiny:latest"},
		{"tiny:latest", "tiny", "latest", true, "tiny:latest"},
		{"llama3.2:1b-instruct-q8_0", "llama3.2", "1b-instruct-q8_0", true, "llama3.2:1b-instruct-q8_0"},
		{"library/tiny", "tiny", "", true, "tiny:latest"},
		{"Library/tiny:7b", "tiny", "7b", true, "tiny:7b"},
		{"registry.ollama.ai/library/tiny", "tiny", "", true, "tiny:latest"},
		{"registry.ollama.ai/acme/tiny", "acme/tiny", "", true, "acme/tiny:latest"},
		{"acme/search-encoder:q8", "acme/search-encoder", "q8", true, "acme/search-encoder:q8"},
		{"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF", "Q4_K_M", true, "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"},
		{"localhost:5000/team/tiny", "localhost:5000/team/tiny", "", true, "localhost:5000/team/tiny:latest"},
		{"Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "", true, "Qwen/Qwen2.5-7B-Instruct:latest"},
		{"", "", "", false, ""},
		{"tiny:", "", "", false, ""},
		{":latest", "", "", false, ""},
		{"a/b/c/d", "", "", false, ""},
		{"a//b", "", "", false, ""},
		{"tiny@sha256:74701a8c", "", "", false, ""},
		{"my.ns/tiny", "", "", false, ""},
		{"-tiny", "", "", false, ""},
		{"tiny model", "", "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			base, tag, ok := parseOllamaName(tt.in)
			if base != tt.base || tag != tt.tag || ok != tt.ok {
				t.Errorf("parseOllamaName(%q) = %q, %q, %v; want %q, %q, %v", tt.in, base, tag, ok, tt.base, tt.tag, tt.ok)
			}
			if c, ok := ollamaCanonical(tt.in); c != tt.canonical || ok != tt.ok {
				t.Errorf("ollamaCanonical(%q) = %q, %v; want %q", tt.in, c, ok, tt.canonical)
			}
		})
	}
}

// FuzzOllamaCanonical checks that a canonical name is its own canonical
// name, carries a tag, and keeps the base and any tag of the name.
func FuzzOllamaCanonical(f *testing.F) {
	for _, s := range []string{"tiny", "library/tiny:7b", "registry.ollama.ai/library/tiny", "localhost:5000/a/b:c", "a/b/c/d", "x:", "@sha256:00", "hf.co/u/m:Q4_K_M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		base, tag, ok := parseOllamaName(s)
		c, cok := ollamaCanonical(s)
		if ok != cok {
			t.Fatalf("parse ok %v, canonical ok %v", ok, cok)
		}
		if !ok {
			return
		}
		again, ok := ollamaCanonical(c)
		if !ok || again != c {
			t.Fatalf("ollamaCanonical(%q) = %q, but ollamaCanonical(%q) = %q, %v", s, c, c, again, ok)
		}
		cb, ct, _ := parseOllamaName(c)
		if cb != base || ct == "" || (tag != "" && ct != tag) {
			t.Fatalf("%q: base %q tag %q, canonical %q: base %q tag %q", s, base, tag, c, cb, ct)
		}
	})
}

// TestCatalogResolvesNamesAsOllamaDoes checks Lookup and Resolve on the
// models two Ollama servers list: an untagged name is its :latest tag
// (with Ollama's default namespace and host), an exact id always wins,
// and a 404 for a name the catalog has under other tags names them.
func TestCatalogResolvesNamesAsOllamaDoes(t *testing.T) {
	up := newFakeOllama(t)
	lab := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/models": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"tiny:latest","object":"model","created":1749546861,"owned_by":"library"},{"id":"qwen3:0.6b","object":"model","created":1749546861,"owned_by":"library"}]}`)
		},
		"GET /api/version": serve(t, "ollama/version.json", 200),
		"POST /api/show":   serve(t, "ollama/show_tiny.json", 200),
	})
	cat, _ := discoveringCatalog(t,
		discovering("ollama", up.URL+"/v1", config.Model{Name: "nomic-embed-text:latest", Capabilities: []string{CapEmbeddings}, Dimensions: 768}),
		discovering("lab", lab.URL+"/v1", config.Model{Name: "tiny", Capabilities: []string{CapChat}, MaxTokens: 4096}),
	)
	tests := []struct {
		name    string
		resolve bool // Resolve rather than Lookup
		in      string
		want    string // the model's id; "" for a 404
		// discovered is whether the model found is a discovered one
		discovered bool
		// candidates are the ids a 404 names
		candidates []string
	}{
		{"an untagged id is its latest tag", false, "ollama/tiny", "ollama/tiny:latest", true, nil},
		{"the canonical id", false, "ollama/tiny:latest", "ollama/tiny:latest", true, nil},
		{"the default namespace", false, "ollama/library/tiny", "ollama/tiny:latest", true, nil},
		{"the default host and namespace with a tag", false, "ollama/registry.ollama.ai/library/llava:7b", "ollama/llava:7b", true, nil},
		{"a namespaced name with its tag", false, "ollama/acme/search-encoder:q8", "ollama/acme/search-encoder:q8", true, nil},
		{"a configured model of the exact name wins over the rule", false, "lab/tiny", "lab/tiny", false, nil},
		{"a configured model wins over its discovered twin", false, "ollama/nomic-embed-text", "ollama/nomic-embed-text:latest", false, nil},
		{"no latest tag: a 404 naming the tags there are", false, "ollama/llava", "", false, []string{"ollama/llava:7b"}},
		{"another tag: a 404 naming the tags there are", false, "ollama/llava:13b", "", false, []string{"ollama/llava:7b"}},
		{"a namespaced name without its tag", false, "ollama/acme/search-encoder", "", false, []string{"ollama/acme/search-encoder:q8"}},
		{"the tags of the provider asked for only", false, "lab/llava", "", false, nil},
		{"a name no provider has", false, "ollama/gpt-4o", "", false, nil},
		{"a tag is never dropped", false, "lab/tiny:latest", "lab/tiny:latest", true, nil},
		{"resolve: a provider id by the rule", true, "ollama/tiny", "ollama/tiny:latest", true, nil},
		{"resolve: a bare untagged name one provider serves", true, "legacy-embed", "ollama/legacy-embed:latest", true, nil},
		{"resolve: a bare name in the default namespace", true, "library/broken", "ollama/broken:latest", true, nil},
		{"resolve: a bare name of the exact name wins over the rule", true, "tiny", "lab/tiny", false, nil},
		{"resolve: a bare untagged name without a latest tag", true, "qwen3", "", false, []string{"lab/qwen3:0.6b"}},
		{"resolve: a bare name served by two providers is ambiguous", true, "tiny:latest", "", false, []string{"lab/tiny:latest", "ollama/tiny:latest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			find := cat.Lookup
			if tt.resolve {
				find = cat.Resolve
			}
			m, err := find(tt.in)
			if tt.want != "" {
				if err != nil || m.ID != tt.want || m.Discovered != tt.discovered {
					t.Fatalf("%q: %+v, %v; want %s (discovered %v)", tt.in, m, err, tt.want, tt.discovered)
				}
				return
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.NotFound || e.Details["model"] != tt.in {
				t.Fatalf("%q: %+v, %v; want a 404 naming the model", tt.in, m, err)
			}
			got, _ := e.Details["candidates"].([]string)
			if !slices.Equal(got, tt.candidates) {
				t.Errorf("candidates %v, want %v", got, tt.candidates)
			}
			for _, c := range tt.candidates {
				if !strings.Contains(e.Message, c) {
					t.Errorf("message %q does not name %s", e.Message, c)
				}
			}
			if base, tag, _ := parseOllamaName(tt.in[strings.IndexByte(tt.in, '/')+1:]); len(tt.candidates) == 1 && tag == "" && base != "" && !strings.Contains(e.Message, ":latest") {
				t.Errorf("message %q does not say an untagged name means :latest", e.Message)
			}
		})
	}
}

// BenchmarkCatalogResolve measures model resolution on the request path:
// an exact id (every configured model), an untagged Ollama id resolved by
// runtimeName, and a bare untagged name.
//
//	go test ./server/llm/ -run '^$' -bench CatalogResolve -benchmem
func BenchmarkCatalogResolve(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/models", serve(b, "ollama/models.json", 200))
	mux.Handle("GET /api/version", serve(b, "ollama/version.json", 200))
	mux.Handle("POST /api/show", serve(b, "ollama/show_tiny.json", 200))
	up := httptest.NewServer(mux)
	b.Cleanup(up.Close)
	cat, err := NewCatalog(context.Background(), []config.Provider{discovering("ollama", up.URL+"/v1")}, CatalogOptions{Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	if err := cat.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"ollama/tiny:latest", "ollama/tiny", "tiny"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if m, err := cat.Resolve(name); err != nil || m.ID != "ollama/tiny:latest" {
					b.Fatal(m, err)
				}
			}
		})
	}
}
