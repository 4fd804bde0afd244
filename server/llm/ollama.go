package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Ollama is reached as an `openai`-type provider whose base URL is its
// OpenAI-compatible layer (http://host:11434/v1). Two things differ from
// other OpenAI-compatible servers, and this file handles both:
//
//   - its model names: `[host/][namespace/]model[:tag]`, with the defaults
//     registry.ollama.ai, library and latest (types/model/name.go in
//     github.com/ollama/ollama); it lists `tiny:latest` and answers to
//     `tiny`. The catalog resolves names by the same rule (Catalog.Lookup).
//   - what a model can do: its native API reports it (POST /api/show
//     `capabilities` and `model_info`), so discovery takes it from there
//     rather than guessing from the name.

// Ollama's name defaults.
const (
	ollamaHost      = "registry.ollama.ai"
	ollamaNamespace = "library"
	ollamaTag       = "latest"
)

// ollamaShowConcurrency bounds the /api/show calls one discovery runs at once.
const ollamaShowConcurrency = 4

// parseOllamaName splits an Ollama model name into its base, written as
// Ollama lists it (the default host and namespace left out: `tiny`,
// `me/tiny`, `example.com/me/tiny`), and its tag ("" when it has none).
// ok is false for anything that is not a name in that form (digests
// included).
func parseOllamaName(s string) (base, tag string, ok bool) {
	if i, j := strings.LastIndexByte(s, ':'), strings.LastIndexByte(s, '/'); i > j {
		s, tag = s[:i], s[i+1:]
		if !ollamaPart(tag, ".") {
			return "", "", false
		}
	}
	parts := strings.Split(s, "/")
	var host, ns, model string
	switch len(parts) {
	case 1:
		model = parts[0]
	case 2:
		ns, model = parts[0], parts[1]
	case 3:
		host, ns, model = parts[0], parts[1], parts[2]
	default:
		return "", "", false
	}
	if !ollamaPart(model, ".") || (len(parts) > 1 && !ollamaPart(ns, "")) || (len(parts) > 2 && !ollamaPart(host, ".:")) {
		return "", "", false
	}
	switch {
	case host != "" && !strings.EqualFold(host, ollamaHost):
		base = host + "/" + ns + "/" + model
	case ns != "" && !strings.EqualFold(ns, ollamaNamespace):
		base = ns + "/" + model
	default:
		base = model
	}
	return base, tag, true
}

// ollamaPart reports whether s is a valid part of an Ollama name: a
// letter, digit or '_' followed by up to 349 of those, '-' and the
// characters in extra.
func ollamaPart(s, extra string) bool {
	if s == "" || len(s) > 350 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case i > 0 && (c == '-' || strings.IndexByte(extra, c) >= 0):
		default:
			return false
		}
	}
	return true
}

// ollamaCanonical is the name Ollama lists for the model name s: its
// defaults filled in and the default host and namespace left out
// (`tiny` → `tiny:latest`, `library/tiny:7b` → `tiny:7b`,
// `registry.ollama.ai/library/tiny` → `tiny:latest`).
func ollamaCanonical(s string) (string, bool) {
	base, tag, ok := parseOllamaName(s)
	if !ok {
		return "", false
	}
	return base + ":" + cmp.Or(tag, ollamaTag), true
}

// ollamaCapabilities maps the capabilities Ollama reports to the catalog's.
// Ollama's `thinking` is not mapped to reasoning, as the catalog sends
// reasoning models max_completion_tokens, which Ollama's OpenAI layer
// ignores (it reads max_tokens); nor are `tools` (Ollama refuses tools to
// a model without them, with a 400 that reaches the caller), `insert`,
// `image` or `audio`, which have no catalog capability.
var ollamaCapabilities = map[string]string{
	"completion": CapChat,
	"embedding":  CapEmbeddings,
	"vision":     CapVision,
}

// ollamaShow is the part of Ollama's POST /api/show answer discovery reads.
type ollamaShow struct {
	Capabilities []string                   `json:"capabilities"`
	ModelInfo    map[string]json.RawMessage `json:"model_info"`
	Details      struct {
		ContextLength   int `json:"context_length"`
		EmbeddingLength int `json:"embedding_length"`
	} `json:"details"`
}

// ollamaVersion is Ollama's GET /api/version answer.
type ollamaVersion struct {
	Version string `json:"version"`
}

// ollamaProbe is an OpenAI-compatible provider's discovery of what Ollama
// reports: whether the server is Ollama, and each model's capabilities and
// lengths. It remembers what it logged so that a lasting failure is
// logged once, not at every refresh.
type ollamaProbe struct {
	log *slog.Logger

	mu      sync.Mutex
	version string          // the Ollama version last detected; "" when not Ollama
	failed  map[string]bool // models whose /api/show failure is logged
}

func newOllamaProbe(log *slog.Logger) *ollamaProbe {
	return &ollamaProbe{log: log, failed: map[string]bool{}}
}

// native is the upstream of Ollama's native API (/api/...) beside the
// OpenAI layer at up's base URL; ok is false when the base URL does not
// end in /v1, where Ollama serves that layer.
func (o *ollamaProbe) native(up upstream) (upstream, bool) {
	root, ok := strings.CutSuffix(up.baseURL, "/v1")
	if !ok {
		return up, false
	}
	up.baseURL = root
	return up, true
}

// detect reports whether up is Ollama: GET /api/version answers a
// version in Ollama's shape. A change is logged.
func (o *ollamaProbe) detect(ctx context.Context, up upstream) bool {
	var v ollamaVersion
	if err := up.do(ctx, http.MethodGet, "/api/version", nil, &v); err != nil {
		v.Version = ""
	}
	o.mu.Lock()
	changed := v.Version != o.version
	o.version = v.Version
	o.mu.Unlock()
	if changed && v.Version != "" {
		o.log.Info("provider is Ollama: discovered models take their capabilities from /api/show", "provider", up.provider, "ollamaVersion", v.Version)
	}
	return v.Version != ""
}

// describe fills in the capabilities and lengths of infos from POST
// /api/show, at most ollamaShowConcurrency at once, within ctx. A model
// whose /api/show fails, or reports no capability the catalog knows, is
// left as it was (the catalog then guesses from its name); each failing
// model is logged once until it succeeds again.
func (o *ollamaProbe) describe(ctx context.Context, up upstream, infos []ModelInfo) {
	sem := make(chan struct{}, ollamaShowConcurrency)
	fails := make([]error, len(infos))
	var wg sync.WaitGroup
	for i := range infos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				fails[i] = context.Cause(ctx)
				return
			}
			fails[i] = o.show(ctx, up, &infos[i])
		}()
	}
	wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	failed := make(map[string]bool, len(o.failed))
	for i, err := range fails {
		name := infos[i].Name
		if err == nil {
			continue
		}
		if !o.failed[name] {
			o.log.Warn("Ollama's /api/show failed; the model's capabilities are guessed from its name", "provider", up.provider, "model", name, "error", err.Error())
		}
		failed[name] = true
	}
	o.failed = failed
}

// show asks /api/show about one model and fills in what it reports.
func (o *ollamaProbe) show(ctx context.Context, up upstream, in *ModelInfo) error {
	var s ollamaShow
	if err := up.do(ctx, http.MethodPost, "/api/show", map[string]string{"model": in.Name}, &s); err != nil {
		return err
	}
	var caps []string
	for _, c := range s.Capabilities {
		if cp, ok := ollamaCapabilities[c]; ok && !slices.Contains(caps, cp) {
			caps = append(caps, cp)
		}
	}
	if len(caps) > 0 {
		in.Capabilities = caps
	}
	var arch string
	_ = json.Unmarshal(s.ModelInfo["general.architecture"], &arch)
	length := func(key string, fallback int) int {
		var n int
		if arch != "" && json.Unmarshal(s.ModelInfo[arch+"."+key], &n) == nil && n > 0 {
			return n
		}
		return fallback
	}
	if n := length("context_length", s.Details.ContextLength); n > 0 {
		in.MaxTokens = n
	}
	embeds := slices.Contains(caps, CapEmbeddings) || (len(caps) == 0 && guessCapabilities(in.Name)[0] == CapEmbeddings)
	if n := length("embedding_length", s.Details.EmbeddingLength); n > 0 && embeds {
		in.Dimensions = n
	}
	return nil
}
