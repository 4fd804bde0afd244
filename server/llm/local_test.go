package llm

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

func cosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}

func TestHashEmbed(t *testing.T) {
	v, n := HashEmbed("The quick brown fox jumps over the lazy dog.", 384)
	if len(v) != 384 || n != 9 {
		t.Fatalf("len %d tokens %d", len(v), n)
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("not L2-normalised: |v|^2 = %v", norm)
	}
	again, _ := HashEmbed("The quick brown fox jumps over the lazy dog.", 384)
	if !slices.Equal(v, again) {
		t.Error("not deterministic")
	}
	lower, _ := HashEmbed("the QUICK brown fox jumps over the lazy dog", 384)
	if c := cosine(v, lower); c < 0.999 {
		t.Errorf("case and punctuation should not matter: cosine %v", c)
	}

	// Lexical similarity: shared words and spellings score higher.
	q, _ := HashEmbed("how do I reset my password", 384)
	near, _ := HashEmbed("password reset instructions", 384)
	typo, _ := HashEmbed("how do I reset my pasword", 384)
	far, _ := HashEmbed("quarterly revenue grew in europe", 384)
	if !(cosine(q, typo) > cosine(q, near) && cosine(q, near) > cosine(q, far)) {
		t.Errorf("similarities typo %.3f near %.3f far %.3f", cosine(q, typo), cosine(q, near), cosine(q, far))
	}

	if v, n := HashEmbed("!!! ???", 64); n != 1 || cosine(v, v) < 0.99 {
		t.Errorf("punctuation-only text: %d tokens", n)
	}
	if v, n := HashEmbed("   ", 64); n != 0 || cosine(v, v) != 0 {
		t.Errorf("blank text: %d tokens", n)
	}
	if _, n := HashEmbed("Zürich straße 東京", 384); n != 3 {
		t.Errorf("unicode words: %d", n)
	}
}

func TestLocalProvider(t *testing.T) {
	g, rec := newGateway(t, config.Provider{Name: "local", Type: TypeLocal, Models: []config.Model{{Name: "hash-embed-768"}}})
	ctx := context.Background()
	res, err := g.Embed(ctx, "local/hash-embed-384", EmbedRequest{Inputs: []string{"hello world", "bye"}, Dimensions: nil}, "input")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Vectors) != 2 || len(res.Vectors[0]) != 384 || res.Usage.PromptTokens != 3 || res.Usage.Estimated {
		t.Errorf("res %+v", res.Usage)
	}
	res, err = g.Embed(ctx, "local/hash-embed-768", EmbedRequest{Inputs: []string{"hello"}, Dimensions: nil}, "text")
	if err != nil || len(res.Vectors[0]) != 768 {
		t.Fatalf("768: %v", err)
	}
	if _, err := g.Embed(ctx, "local/hash-embed-384", EmbedRequest{Inputs: []string{"x"}, Dimensions: ptr(100)}, "input"); errs.KindOf(err) != errs.Invalid {
		t.Errorf("other dimensions: %v", err)
	}
	if c := rec.all(); len(c) != 2 || c[0].Cost != 0 || c[0].Model != "local/hash-embed-384" {
		t.Errorf("recorded %+v", c)
	}
}

func TestCatalogConfig(t *testing.T) {
	ctx := context.Background()
	t.Run("local is always there", func(t *testing.T) {
		cat, err := NewCatalog(ctx, nil, CatalogOptions{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		m, err := cat.Lookup("local/hash-embed-384")
		if err != nil || m.Dimensions != 384 || !m.Has(CapEmbeddings) || m.Pricing == nil {
			t.Fatalf("%+v %v", m, err)
		}
	})
	for _, tc := range []struct {
		name      string
		providers []config.Provider
		contains  string
	}{
		{"unknown type", []config.Provider{{Name: "x", Type: "cohere"}}, `unknown type "cohere"`},
		{"missing type", []config.Provider{{Name: "x"}}, "type is required"},
		{"bad name", []config.Provider{{Name: "Open/AI", Type: TypeOpenAI}}, "name must be"},
		{"duplicate provider", []config.Provider{{Name: "a", Type: TypeOpenAI}, {Name: "a", Type: TypeOpenAI}}, "defined twice"},
		{"duplicate model", []config.Provider{{Name: "a", Type: TypeOpenAI, Models: []config.Model{{Name: "m"}, {Name: "m"}}}}, `model "m" defined twice`},
		{"unknown capability", []config.Provider{{Name: "a", Type: TypeOpenAI, Models: []config.Model{{Name: "m", Capabilities: []string{"telepathy"}}}}}, `unknown capability "telepathy"`},
		{"bad base URL", []config.Provider{{Name: "a", Type: TypeOpenAI, BaseURL: "localhost:11434"}}, "absolute http(s) URL"},
		{"local name reserved", []config.Provider{{Name: "local", Type: TypeOpenAI}}, "reserved"},
		{"self fallback", []config.Provider{{Name: "a", Type: TypeOpenAI, Models: []config.Model{{Name: "m", Fallbacks: []string{"a/m"}}}}}, "itself"},
		{"negative pricing", []config.Provider{{Name: "a", Type: TypeOpenAI, Models: []config.Model{{Name: "m", Pricing: &config.Pricing{Input: -1}}}}}, "pricing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCatalog(ctx, tc.providers, CatalogOptions{Logger: quietLog})
			if err == nil || !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("err = %v, want %q", err, tc.contains)
			}
		})
	}
	t.Run("model defaults", func(t *testing.T) {
		cat, err := NewCatalog(ctx, []config.Provider{{Name: "a", Type: TypeOpenAI, Models: []config.Model{{Name: "chat"}, {Name: "emb", Dimensions: 768}}}}, CatalogOptions{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := cat.Lookup("a/chat"); !m.Has(CapChat) {
			t.Errorf("%+v", m)
		}
		if m, _ := cat.Lookup("a/emb"); !m.Has(CapEmbeddings) {
			t.Errorf("%+v", m)
		}
	})
	t.Run("ambiguous bare name", func(t *testing.T) {
		cat, _ := NewCatalog(ctx, []config.Provider{{Name: "a", Type: TypeOpenAI, Models: []config.Model{{Name: "m"}}}, {Name: "b", Type: TypeOpenAI, Models: []config.Model{{Name: "m"}}}}, CatalogOptions{Logger: quietLog})
		_, err := cat.Resolve("m")
		if errs.KindOf(err) != errs.NotFound || !strings.Contains(err.Error(), "a/m, b/m") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestCatalogCreatedAtIsStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	providers := []config.Provider{{Name: "a", Type: TypeOpenAI, Models: []config.Model{{Name: "m"}}}}
	open := func(now time.Time) *Model {
		st, err := store.OpenBolt(path)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		cat, err := NewCatalog(context.Background(), providers, CatalogOptions{Store: st, Logger: quietLog, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := cat.Lookup("a/m")
		return m
	}
	first := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := open(first).CreatedAt; !got.Equal(first) {
		t.Fatalf("first start: %v", got)
	}
	if got := open(first.Add(48 * time.Hour)).CreatedAt; !got.Equal(first) {
		t.Errorf("after a restart createdAt moved to %v", got)
	}
}
