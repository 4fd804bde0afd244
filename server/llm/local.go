package llm

import (
	"context"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// localProvider is the built-in offline provider. It serves feature-hashing
// embedding models (local/hash-embed-384 by default) and nothing else.
//
// The vectors are LEXICAL, not semantic: texts that share words, word
// pairs and spelling fragments land close together; synonyms and
// paraphrases with different words do not. It is deterministic, needs no
// network and no model weights, and is meant for tests, offline development
// and keyword-style similarity, not as a substitute for a neural embedding
// model.
type localProvider struct{}

var _ Provider = localProvider{}

// localDimensions reads the vector length from a name ending in -<n>
// (hash-embed-768), else 384.
func localDimensions(name string) int {
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil {
			return n
		}
	}
	return 384
}

func (localProvider) notServed(m *Model) error {
	return &CallError{Err: errs.E(errs.Invalid, "model %s is an embedding model; the local provider generates no text", m.ID)}
}

// Complete implements Provider; the local provider generates no text.
func (p localProvider) Complete(_ context.Context, m *Model, _ *Request) (*Response, error) {
	return nil, p.notServed(m)
}

// Stream implements Provider; the local provider generates no text.
func (p localProvider) Stream(_ context.Context, m *Model, _ *Request) (Stream, error) {
	return nil, p.notServed(m)
}

// Embed implements Provider.
func (localProvider) Embed(ctx context.Context, m *Model, r *EmbedRequest) (*EmbedResponse, error) {
	if r.Dimensions != nil && *r.Dimensions != m.Dimensions {
		return nil, &CallError{Err: errs.E(errs.Invalid, "model %s produces %d-dimensional vectors; dimensions=%d is not available", m.ID, m.Dimensions, *r.Dimensions)}
	}
	out := &EmbedResponse{Vectors: make([][]float32, len(r.Inputs)), Usage: &Usage{}}
	for i, text := range r.Inputs {
		if err := ctx.Err(); err != nil {
			return nil, ErrClientGone
		}
		v, n := HashEmbed(text, m.Dimensions)
		out.Vectors[i] = v
		out.Usage.PromptTokens += n
	}
	return out, nil
}

// Discover implements Provider; the local models are built in.
func (localProvider) Discover(context.Context) ([]ModelInfo, error) { return nil, nil }

// Feature weights of HashEmbed.
const (
	weightWord    = 1.0
	weightBigram  = 0.5
	weightNgrams  = 0.5 // shared by a word's character n-grams of one length
	minCharNgram  = 3
	maxCharNgram  = 4
	featureWord   = 'w'
	featureBigram = 'b'
	featureChar   = 'c'
)

// HashEmbed returns the dim-dimensional lexical embedding of text and the
// number of word tokens it read. Features: lower-cased words (letters and
// digits), adjacent word pairs, and character 3- and 4-grams of each word
// padded with boundary marks, each hashed with 64-bit FNV-1a into a signed
// bucket (the hash's top bit picks the sign); the vector is L2-normalised.
// Text without letters or digits is embedded from its non-space characters;
// blank text gives the zero vector.
func HashEmbed(text string, dim int) ([]float32, int) {
	words := lexicalWords(text)
	if len(words) == 0 {
		if t := strings.Join(strings.Fields(text), ""); t != "" {
			words = []string{t}
		}
	}
	acc := make([]float64, dim)
	add := func(kind byte, w float64, parts ...string) {
		h := fnvOffset
		h = fnvByte(h, kind)
		for i, p := range parts {
			if i > 0 {
				h = fnvByte(h, 0)
			}
			for j := 0; j < len(p); j++ {
				h = fnvByte(h, p[j])
			}
		}
		idx := (h & math.MaxInt64) % uint64(dim)
		if h>>63 == 1 {
			acc[idx] -= w
		} else {
			acc[idx] += w
		}
	}
	var runes []rune
	for i, w := range words {
		add(featureWord, weightWord, w)
		if i > 0 {
			add(featureBigram, weightBigram, words[i-1], w)
		}
		runes = append(runes[:0], '\x02')
		runes = append(runes, []rune(w)...)
		runes = append(runes, '\x03')
		for n := minCharNgram; n <= maxCharNgram; n++ {
			count := len(runes) - n + 1
			if count <= 0 {
				continue
			}
			wt := weightNgrams / float64(count)
			for s := 0; s < count; s++ {
				add(featureChar, wt, string(runes[s:s+n]))
			}
		}
	}
	var norm float64
	for _, x := range acc {
		norm += x * x
	}
	out := make([]float32, dim)
	if norm == 0 {
		return out, len(words)
	}
	norm = math.Sqrt(norm)
	for i, x := range acc {
		out[i] = float32(x / norm)
	}
	return out, len(words)
}

const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

// lexicalWords splits text into lower-cased runs of letters, digits and
// combining marks.
func lexicalWords(text string) []string {
	var (
		words []string
		b     strings.Builder
	)
	flush := func() {
		if b.Len() > 0 {
			words = append(words, b.String())
			b.Reset()
		}
	}
	for len(text) > 0 {
		r, size := utf8.DecodeRuneInString(text)
		text = text[size:]
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) {
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		flush()
	}
	flush()
	return words
}
