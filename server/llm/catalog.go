package llm

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// Provider types a config entry can name.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeGemini    = "gemini"
	TypeLocal     = "local"
)

// LocalProvider is the name of the built-in offline provider, and
// LocalEmbedModel the model it always serves.
const (
	LocalProvider   = "local"
	LocalEmbedModel = "hash-embed-384"
)

// DefaultTimeout bounds an upstream call when a provider sets none.
const DefaultTimeout = 60 * time.Second

// bucketModels remembers when each model id entered the catalog.
const bucketModels = "llm_models"

// Pricing is USD per million tokens.
type Pricing struct {
	Input  float64
	Output float64
	// CachedInput prices the prompt tokens served from the provider's
	// prompt cache (Usage.CachedPromptTokens); nil prices them at Input.
	CachedInput *float64
}

// Model is one catalog entry.
type Model struct {
	// ID is "<provider>/<name>".
	ID       string
	Provider string
	// Name is the upstream's model name.
	Name         string
	Capabilities []string
	// MaxTokens is the model's token limit (chat/text models); 0 when unknown.
	MaxTokens int
	// Dimensions is the configured or discovered vector length (embedding
	// models); 0 when unknown. EmbeddingDimensions also knows the length
	// of the vectors the model has served.
	Dimensions int
	// Pricing is nil when the operator configured none.
	Pricing *Pricing
	// Fallbacks are model ids tried, in order, when this one fails with a
	// 429, a 5xx, a connection error or a timeout.
	Fallbacks []string
	// CreatedAt is the provider's creation date when discovery reports one,
	// else when the model first entered this catalog.
	CreatedAt time.Time
	// Discovered is true for models listed by the provider rather than configured.
	Discovered bool

	provider Provider
	ptype    string
	// served is the length of the last vectors the model served at its
	// own size (no `dimensions` asked), 0 before the first; shared by the
	// successive Models of one id across discovery refreshes.
	served *atomic.Int32
}

// EmbeddingDimensions is the model's vector length: the configured or
// discovered one, else the length of the vectors it last served at its
// own size (kept in memory only: after a restart, 0 until its first
// embedding); 0 when unknown.
func (m *Model) EmbeddingDimensions() int {
	if m.Dimensions > 0 || m.served == nil {
		return m.Dimensions
	}
	return int(m.served.Load())
}

// observeDimensions records the length n of vectors the model served at
// its own size, for a model whose length is not configured. It costs an
// atomic load once known.
func (m *Model) observeDimensions(n int) {
	if m.Dimensions > 0 || m.served == nil || n <= 0 || n > math.MaxInt32 {
		return
	}
	if int(m.served.Load()) != n {
		m.served.Store(int32(n))
	}
}

// Has reports whether the model declares capability c.
func (m *Model) Has(c string) bool { return slices.Contains(m.Capabilities, c) }

// Cost is the price of u in USD, rounded to usage.CostQuantum; 0 without
// pricing.
func (m *Model) Cost(u Usage) float64 {
	if m.Pricing == nil {
		return 0
	}
	p := m.Pricing
	cached := min(max(u.CachedPromptTokens, 0), u.PromptTokens)
	cachedPrice := p.Input
	if p.CachedInput != nil {
		cachedPrice = *p.CachedInput
	}
	return usage.RoundUSD((float64(u.PromptTokens-cached)*p.Input + float64(cached)*cachedPrice + float64(u.CompletionTokens)*p.Output) / 1e6)
}

// Type is the provider type serving the model (openai, anthropic, gemini, local).
func (m *Model) Type() string { return m.ptype }

// providerEntry is one configured provider.
type providerEntry struct {
	name     string
	ptype    string
	adapter  Provider
	discover bool
	models   []*Model // configured
}

// snapshot is an immutable view of the catalog.
type snapshot struct {
	byID   map[string]*Model
	byName map[string][]*Model
	// byBase holds the models whose name has a tag, by the name without
	// it as Ollama writes it (see parseOllamaName), sorted by id: what a
	// 404 for an untagged name suggests.
	byBase map[string][]*Model
	list   []*Model // sorted by id
}

// Catalog holds the providers and their models. Reads are lock-free;
// discovery swaps in a new snapshot.
type Catalog struct {
	providers map[string]*providerEntry
	order     []string
	snap      atomic.Pointer[snapshot]
	store     store.Store
	log       *slog.Logger
	now       func() time.Time

	mu         sync.Mutex // serialises refreshes
	discovered map[string][]*Model
	events     events.Emitter
}

// CatalogOptions are NewCatalog's inputs besides the provider list.
type CatalogOptions struct {
	// Store keeps first-seen dates of models; optional.
	Store store.Store
	// Logger; slog.Default when nil.
	Logger *slog.Logger
	// Getenv reads the API key variables; os.Getenv when nil.
	Getenv func(string) string
	// Transport is the HTTP transport for upstream calls; a tuned shared
	// transport when nil.
	Transport http.RoundTripper
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Events receives llm.models_changed when a rediscovery adds or
	// removes models; optional.
	Events events.Emitter
}

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// NewCatalog builds the catalog from the config's providers. The built-in
// `local` provider with local/hash-embed-384 is always present. It fails on
// an unknown provider type, a duplicate name, or an unknown capability.
func NewCatalog(ctx context.Context, providers []config.Provider, o CatalogOptions) (*Catalog, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Transport == nil {
		o.Transport = NewTransport()
	}
	c := &Catalog{providers: map[string]*providerEntry{}, store: o.Store, log: o.Logger, now: o.Now, discovered: map[string][]*Model{}, events: o.Events}
	var problems []string
	hasLocal := false
	for i, pc := range providers {
		where := fmt.Sprintf("providers[%d]", i)
		if pc.Name != "" {
			where = fmt.Sprintf("provider %q", pc.Name)
		}
		if !providerName.MatchString(pc.Name) {
			problems = append(problems, where+": name must be 1-63 lowercase letters, digits, '.', '_' or '-' (it is the <provider> part of model ids)")
			continue
		}
		if _, dup := c.providers[pc.Name]; dup {
			problems = append(problems, where+": defined twice")
			continue
		}
		p, err := newProviderEntry(pc, o)
		if err != nil {
			problems = append(problems, where+": "+err.Error())
			continue
		}
		if p.ptype == TypeLocal && pc.Name == LocalProvider {
			hasLocal = true
		}
		c.providers[pc.Name] = p
		c.order = append(c.order, pc.Name)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("invalid providers configuration: %s", strings.Join(problems, "; "))
	}
	if !hasLocal {
		if _, taken := c.providers[LocalProvider]; taken {
			return nil, fmt.Errorf("invalid providers configuration: provider %q is reserved for the built-in type local", LocalProvider)
		}
		p, _ := newProviderEntry(config.Provider{Name: LocalProvider, Type: TypeLocal}, o)
		c.providers[LocalProvider] = p
		c.order = append(c.order, LocalProvider)
	}
	if err := c.rebuild(ctx); err != nil {
		return nil, err
	}
	for _, m := range c.snap.Load().list {
		for _, f := range m.Fallbacks {
			if f == m.ID {
				return nil, fmt.Errorf("invalid providers configuration: model %s lists itself as a fallback", m.ID)
			}
			if _, ok := c.snap.Load().byID[f]; !ok {
				c.log.Warn("fallback model is not in the catalog (yet); it is skipped until it appears", "model", m.ID, "fallback", f)
			}
		}
	}
	return c, nil
}

func newProviderEntry(pc config.Provider, o CatalogOptions) (*providerEntry, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = osGetenv
	}
	key := ""
	if pc.APIKeyEnv != "" {
		key = getenv(pc.APIKeyEnv)
		if key == "" {
			o.Logger.Warn("provider API key variable is empty; requests go out without a key", "provider", pc.Name, "apiKeyEnv", pc.APIKeyEnv)
		}
	}
	timeout := pc.Timeout.D()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	hc := &http.Client{Transport: o.Transport}
	up := upstream{provider: pc.Name, baseURL: strings.TrimRight(pc.BaseURL, "/"), client: hc, timeout: timeout, secret: key}
	p := &providerEntry{name: pc.Name, ptype: pc.Type, discover: pc.Discover}
	switch pc.Type {
	case TypeOpenAI:
		if up.baseURL == "" {
			up.baseURL = "https://api.openai.com/v1"
		}
		op := newOpenAI(up)
		op.ollama = newOllamaProbe(o.Logger)
		p.adapter = op
	case TypeAnthropic:
		if up.baseURL == "" {
			up.baseURL = "https://api.anthropic.com/v1"
		}
		p.adapter = newAnthropic(up)
	case TypeGemini:
		if up.baseURL == "" {
			up.baseURL = "https://generativelanguage.googleapis.com/v1beta"
		}
		p.adapter = newGemini(up)
	case TypeLocal:
		p.adapter = localProvider{}
	case "":
		return nil, fmt.Errorf("type is required (one of %s, %s, %s, %s)", TypeOpenAI, TypeAnthropic, TypeGemini, TypeLocal)
	default:
		return nil, fmt.Errorf("unknown type %q (one of %s, %s, %s, %s)", pc.Type, TypeOpenAI, TypeAnthropic, TypeGemini, TypeLocal)
	}
	if up.baseURL != "" && !strings.HasPrefix(up.baseURL, "http://") && !strings.HasPrefix(up.baseURL, "https://") {
		return nil, fmt.Errorf("baseUrl %q must be an absolute http(s) URL", pc.BaseURL)
	}
	seen := map[string]bool{}
	var problems []string
	for j, mc := range pc.Models {
		if strings.TrimSpace(mc.Name) == "" {
			problems = append(problems, fmt.Sprintf("models[%d]: name is required", j))
			continue
		}
		if seen[mc.Name] {
			problems = append(problems, fmt.Sprintf("model %q defined twice", mc.Name))
			continue
		}
		seen[mc.Name] = true
		m := &Model{
			ID: pc.Name + "/" + mc.Name, Provider: pc.Name, Name: mc.Name,
			Capabilities: slices.Clone(mc.Capabilities), MaxTokens: mc.MaxTokens, Dimensions: mc.Dimensions,
			Fallbacks: slices.Clone(mc.Fallbacks), provider: p.adapter, ptype: p.ptype, served: new(atomic.Int32),
		}
		if len(m.Capabilities) == 0 {
			if m.Dimensions > 0 || pc.Type == TypeLocal {
				m.Capabilities = []string{CapEmbeddings}
			} else {
				m.Capabilities = []string{CapChat}
			}
		}
		for _, cp := range m.Capabilities {
			if !slices.Contains(KnownCapabilities, cp) {
				problems = append(problems, fmt.Sprintf("model %q: unknown capability %q (known: %s)", mc.Name, cp, strings.Join(KnownCapabilities, ", ")))
			}
		}
		if mc.MaxTokens < 0 || mc.Dimensions < 0 {
			problems = append(problems, fmt.Sprintf("model %q: maxTokens and dimensions must not be negative", mc.Name))
		}
		if mc.Pricing != nil {
			if mc.Pricing.Input < 0 || mc.Pricing.Output < 0 || (mc.Pricing.CachedInput != nil && *mc.Pricing.CachedInput < 0) {
				problems = append(problems, fmt.Sprintf("model %q: pricing must not be negative", mc.Name))
			}
			m.Pricing = &Pricing{Input: mc.Pricing.Input, Output: mc.Pricing.Output}
			if c := mc.Pricing.CachedInput; c != nil {
				v := *c
				m.Pricing.CachedInput = &v
			}
		}
		if pc.Type == TypeLocal {
			if m.Dimensions == 0 {
				m.Dimensions = localDimensions(mc.Name)
			}
			if m.Dimensions < 8 || m.Dimensions > 8192 || !m.Has(CapEmbeddings) || len(m.Capabilities) != 1 {
				problems = append(problems, fmt.Sprintf("model %q: local models are embedding models with 8-8192 dimensions", mc.Name))
			}
			if m.Pricing == nil {
				m.Pricing = &Pricing{}
			}
		}
		p.models = append(p.models, m)
	}
	if pc.Type == TypeLocal && !seen[LocalEmbedModel] {
		p.models = append(p.models, &Model{
			ID: pc.Name + "/" + LocalEmbedModel, Provider: pc.Name, Name: LocalEmbedModel,
			Capabilities: []string{CapEmbeddings}, Dimensions: 384, Pricing: &Pricing{},
			provider: p.adapter, ptype: TypeLocal,
		})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return p, nil
}

// rebuild assembles a snapshot from configured and discovered models and
// stamps first-seen dates.
func (c *Catalog) rebuild(ctx context.Context) error {
	s := &snapshot{byID: map[string]*Model{}, byName: map[string][]*Model{}, byBase: map[string][]*Model{}}
	for _, name := range c.order {
		p := c.providers[name]
		for _, m := range p.models {
			s.byID[m.ID] = m
		}
		for _, m := range c.discovered[name] {
			if _, configured := s.byID[m.ID]; !configured {
				s.byID[m.ID] = m
			}
		}
	}
	for _, m := range s.byID {
		s.list = append(s.list, m)
		s.byName[m.Name] = append(s.byName[m.Name], m)
	}
	sort.Slice(s.list, func(i, j int) bool { return s.list[i].ID < s.list[j].ID })
	for _, m := range s.list {
		if base, tag, ok := parseOllamaName(m.Name); ok && tag != "" {
			s.byBase[base] = append(s.byBase[base], m)
		}
	}
	if err := c.stampCreated(ctx, s.list); err != nil {
		return err
	}
	c.snap.Store(s)
	return nil
}

// stampCreated sets CreatedAt on models that lack it: the date stored when
// the id was first seen, or now (stored for next time).
func (c *Catalog) stampCreated(ctx context.Context, models []*Model) error {
	now := c.now().UTC().Truncate(time.Second)
	var missing []*Model
	for _, m := range models {
		if m.CreatedAt.IsZero() {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if c.store == nil {
		for _, m := range missing {
			m.CreatedAt = now
		}
		return nil
	}
	return c.store.Update(ctx, func(tx store.Tx) error {
		for _, m := range missing {
			if b := tx.Get(bucketModels, m.ID); b != nil {
				if t, err := time.Parse(time.RFC3339, string(b)); err == nil {
					m.CreatedAt = t.UTC()
					continue
				}
			}
			m.CreatedAt = now
			if err := tx.Put(bucketModels, m.ID, []byte(now.Format(time.RFC3339))); err != nil {
				return err
			}
		}
		return nil
	})
}

// Models returns every model, sorted by id.
func (c *Catalog) Models() []*Model { return c.snap.Load().list }

// Filter selects models of the catalog; an empty field matches every model.
type Filter struct {
	// Provider keeps the models of this provider. A provider the catalog
	// does not know matches nothing (a discovering provider may list none
	// yet), so the answer is an empty list, not an error.
	Provider string
	// Capability keeps the models with this capability; it must be one of
	// KnownCapabilities.
	Capability string
}

// List returns the models that f selects, sorted by id. An unknown
// capability is an errs.Invalid error that lists the known ones.
func (c *Catalog) List(f Filter) ([]*Model, error) {
	if f.Capability != "" && !slices.Contains(KnownCapabilities, f.Capability) {
		return nil, errs.E(errs.Invalid, "unknown capability %q in the capability filter; use one of %s", f.Capability, strings.Join(KnownCapabilities, ", ")).
			WithDetails(map[string]any{"capability": f.Capability, "capabilities": KnownCapabilities})
	}
	all := c.Models()
	if f.Provider == "" && f.Capability == "" {
		return all, nil
	}
	out := make([]*Model, 0, len(all))
	for _, m := range all {
		if (f.Provider == "" || m.Provider == f.Provider) && (f.Capability == "" || m.Has(f.Capability)) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Lookup returns the model with id, or a NotFound error. Besides exact
// ids it applies one naming rule, the one self-hosted runtimes apply
// (runtimeName): `ollama/tiny` is `ollama/tiny:latest` when the catalog
// has no `ollama/tiny`.
func (c *Catalog) Lookup(id string) (*Model, error) {
	s := c.snap.Load()
	if m, ok := s.byID[id]; ok {
		return m, nil
	}
	if m := s.runtimeName(id); m != nil {
		return m, nil
	}
	return nil, c.notFound(s, id)
}

// runtimeName is the catalog's rule for names written the way Ollama's
// users write them: for an id `<provider>/<name>` the catalog does not
// have, the model `<provider>/<canonical name>`, where the canonical name
// is name with Ollama's defaults filled in (ollamaCanonical: the tag
// latest, the namespace library, the host registry.ollama.ai) and written
// as Ollama lists it. So `ollama/tiny`, `ollama/library/tiny` and
// `ollama/registry.ollama.ai/library/tiny` are `ollama/tiny:latest`; an
// untagged name never means another tag. Nil when there is no such model.
func (s *snapshot) runtimeName(id string) *Model {
	provider, name, ok := strings.Cut(id, "/")
	if !ok {
		return nil
	}
	canon, ok := ollamaCanonical(name)
	if !ok || canon == name {
		return nil
	}
	return s.byID[provider+"/"+canon]
}

// notFound is the 404 for id. When the catalog has other tags of the
// name, it names them.
func (c *Catalog) notFound(s *snapshot, id string) error {
	provider, name, ok := strings.Cut(id, "/")
	if _, known := c.providers[provider]; !ok || !known {
		provider, name = "", id
	}
	var tags []string
	if base, tag, ok := parseOllamaName(name); ok {
		for _, m := range s.byBase[base] {
			if provider == "" || m.Provider == provider {
				tags = append(tags, m.ID)
			}
		}
		if len(tags) > 0 {
			why := ""
			if tag == "" {
				why = " (a name without a tag means its :latest tag)"
			}
			return errs.E(errs.NotFound, "model %q is not in the catalog%s; of that name it has %s: ask for one of those",
				id, why, strings.Join(tags, ", ")).
				WithDetails(map[string]any{"model": id, "candidates": tags})
		}
	}
	return errs.E(errs.NotFound, "model %q is not in the catalog; GET /v1/models lists the available models", id).
		WithDetails(map[string]any{"model": id})
}

// Resolve is Lookup that also accepts a bare model name when exactly one
// provider serves a model of that name (or, by runtimeName's rule, of its
// canonical name: `tiny` for `ollama/tiny:latest`).
func (c *Catalog) Resolve(name string) (*Model, error) {
	s := c.snap.Load()
	if m, ok := s.byID[name]; ok {
		return m, nil
	}
	ms := s.byName[name]
	if len(ms) == 0 {
		if m := s.runtimeName(name); m != nil {
			return m, nil
		}
		if canon, ok := ollamaCanonical(name); ok && canon != name {
			ms = s.byName[canon]
		}
	}
	switch len(ms) {
	case 1:
		return ms[0], nil
	case 0:
		return nil, c.notFound(s, name)
	default:
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		sort.Strings(ids)
		return nil, errs.E(errs.NotFound, "model name %q is ambiguous; use one of %s", name, strings.Join(ids, ", ")).
			WithDetails(map[string]any{"model": name, "candidates": ids})
	}
}

// Refresh lists the models of every provider with discover: true and
// swaps them into the catalog. A provider that fails keeps the models it
// had; the errors are returned joined.
func (c *Catalog) Refresh(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var failed []string
	changed := false
	var diffs []modelsDiff
	for _, name := range c.order {
		p := c.providers[name]
		if !p.discover {
			continue
		}
		infos, err := p.adapter.Discover(ctx)
		if err != nil {
			c.log.Warn("model discovery failed", "provider", name, "error", err.Error())
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		old := map[string]*Model{}
		if s := c.snap.Load(); s != nil {
			for _, m := range s.list {
				if m.Provider == name {
					old[m.ID] = m
				}
			}
		}
		var ms []*Model
		for _, in := range infos {
			if in.Name == "" {
				continue
			}
			m := &Model{
				ID: name + "/" + in.Name, Provider: name, Name: in.Name,
				Capabilities: in.Capabilities, MaxTokens: in.MaxTokens, Dimensions: in.Dimensions,
				CreatedAt: in.CreatedAt.UTC(), Discovered: true, provider: p.adapter, ptype: p.ptype, served: new(atomic.Int32),
			}
			if len(m.Capabilities) == 0 {
				m.Capabilities = guessCapabilities(in.Name)
			}
			if prev, ok := old[m.ID]; ok {
				if m.CreatedAt.IsZero() {
					m.CreatedAt = prev.CreatedAt
				}
				if prev.served != nil {
					m.served = prev.served
				}
			}
			ms = append(ms, m)
		}
		if prev, seen := c.discovered[name]; seen {
			if d := diffModels(name, p.models, prev, ms); d.changed() {
				diffs = append(diffs, d)
			}
		}
		c.discovered[name] = ms
		changed = true
	}
	if changed {
		if err := c.rebuild(ctx); err != nil {
			return err
		}
		c.modelsChanged(diffs)
	}
	if len(failed) > 0 {
		return fmt.Errorf("model discovery failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

// Discovers reports whether any provider has discover: true.
func (c *Catalog) Discovers() bool {
	for _, p := range c.providers {
		if p.discover {
			return true
		}
	}
	return false
}

// StartDiscovery refreshes discovered models now and then every interval
// until the returned stop function is called.
func (c *Catalog) StartDiscovery(interval time.Duration) (stop func(context.Context) error) {
	if !c.Discovers() {
		return func(context.Context) error { return nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
			_ = c.Refresh(rctx)
			rcancel()
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return func(sctx context.Context) error {
		cancel()
		select {
		case <-done:
			return nil
		case <-sctx.Done():
			return sctx.Err()
		}
	}
}

// guessCapabilities infers capabilities of a discovered model from its name
// when the provider does not say.
func guessCapabilities(name string) []string {
	n := strings.ToLower(name)
	if strings.Contains(n, "embed") || strings.HasPrefix(n, "text-embedding") || strings.Contains(n, "bge-") || strings.Contains(n, "minilm") {
		return []string{CapEmbeddings}
	}
	return []string{CapChat}
}

// upstreamReadBuffer is the read buffer of an upstream connection. Small:
// a gateway holds one per open stream, and a stream's reader has its own
// buffer above it; reads larger than the buffer bypass it, so large
// answers cost no more reads.
const upstreamReadBuffer = 1 << 10

// NewTransport returns the HTTP transport used for upstream calls: pooled
// keep-alive connections sized for a busy gateway.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2048,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ReadBufferSize:        upstreamReadBuffer,
	}
}
