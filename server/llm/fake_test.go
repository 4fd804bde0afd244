package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// recorded is one request a fake upstream received.
type recorded struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// fake is a provider upstream served by httptest: routes map "METHOD
// /path" to handlers; every request is recorded.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newFake(t *testing.T, routes map[string]http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"message":"no such route in the fake: `+r.Method+" "+r.URL.Path+`"}}`)
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fake) last(t *testing.T) recorded {
	t.Helper()
	rs := f.requests()
	if len(rs) == 0 {
		t.Fatal("the fake upstream received no request")
	}
	return rs[len(rs)-1]
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serve answers with a fixture file, a status and header pairs.
func serve(t testing.TB, name string, status int, headers ...string) http.HandlerFunc {
	body := fixture(t, name)
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// serveStream writes a fixture event stream, flushing after every event
// (events end with a blank line, LF or CRLF).
func serveStream(t testing.TB, name string) http.HandlerFunc {
	body := fixture(t, name)
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		sep := []byte("\n\n")
		if bytes.Contains(body, []byte("\r\n\r\n")) {
			sep = []byte("\r\n\r\n")
		}
		for _, ev := range bytes.SplitAfter(body, sep) {
			_, _ = w.Write(ev)
			fl.Flush()
		}
	}
}

// memRecorder is a Recorder keeping calls in memory.
type memRecorder struct {
	mu    sync.Mutex
	calls []recordedUsage
}

type recordedUsage struct {
	Principal, Model   string
	Prompt, Completion int
	Cost               float64
}

func (m *memRecorder) Record(principal, model string, prompt, completion int, cost float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.calls) < 10000 {
		m.calls = append(m.calls, recordedUsage{principal, model, prompt, completion, cost})
	}
}

func (m *memRecorder) all() []recordedUsage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]recordedUsage(nil), m.calls...)
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// newGateway builds a gateway over providers with an in-memory recorder.
func newGateway(t testing.TB, providers ...config.Provider) (*Gateway, *memRecorder) {
	t.Helper()
	cat, err := NewCatalog(context.Background(), providers, CatalogOptions{Logger: quietLog, Getenv: func(k string) string {
		if strings.HasSuffix(k, "_KEY") {
			return "sk-test-secret-" + strings.ToLower(k)
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &memRecorder{}
	return &Gateway{Catalog: cat, Usage: rec, Log: quietLog}, rec
}

// provider is a config.Provider shorthand.
func provider(name, typ, baseURL string, models ...config.Model) config.Provider {
	return config.Provider{Name: name, Type: typ, BaseURL: baseURL, APIKeyEnv: strings.ToUpper(name) + "_KEY", Timeout: config.Duration(5 * time.Second), Models: models}
}

func chatModel(name string, fallbacks ...string) config.Model {
	return config.Model{Name: name, Capabilities: []string{CapChat}, MaxTokens: 128000, Pricing: &config.Pricing{Input: 0.15, Output: 0.60}, Fallbacks: fallbacks}
}

// jsonEqual compares two JSON documents semantically.
func assertJSON(t *testing.T, got []byte, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("JSON differs\n got: %s\nwant: %s", gi, wi)
	}
}

func ptr[T any](v T) *T { return &v }

// toolRequest is a conversation with a tool round trip, used by every
// adapter's translation test.
func toolRequest(model string) *Request {
	return &Request{
		Model: model,
		Messages: []Message{
			{Role: RoleSystem, Content: "You are terse."},
			{Role: RoleUser, Content: "Weather in Paris?"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
			{Role: RoleTool, Content: `{"temp":21}`, ToolCallID: "call_1"},
			{Role: RoleUser, Content: "And tomorrow?"},
		},
		MaxTokens:         ptr(256),
		Temperature:       ptr(0.2),
		Stop:              []string{"END"},
		Tools:             []Tool{weatherTool},
		ToolChoice:        &ToolChoice{Mode: ToolChoiceAuto},
		ParallelToolCalls: ptr(false),
	}
}

var weatherTool = Tool{
	Name:        "get_weather",
	Description: "Current weather",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"City"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"],"additionalProperties":false}`),
}
