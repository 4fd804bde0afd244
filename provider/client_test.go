package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
)

func TestCheckEndpoint(t *testing.T) {
	tests := []struct {
		endpoint string
		want     string // substring of the problem; "" for fine
	}{
		{"http://127.0.0.1:8080", ""},
		{"https://switchboard.example.com", ""},
		{"https://switchboard.example.com/prefix", ""},
		{"127.0.0.1:8080", "absolute http"},
		{"ftp://example.com", "absolute http"},
		{"http://", "no host"},
		{"http://127.0.0.1:8080/v1", "without /v1"},
		{"http://127.0.0.1:8080?x=1", "query"},
		{"http://a b", "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			got := checkEndpoint(tt.endpoint)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("checkEndpoint(%q) = %q, want %q", tt.endpoint, got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		attempt int
		want    time.Duration
	}{
		{"seconds", "3", 0, 3 * time.Second},
		{"zero", "0", 2, 0},
		{"absent backs off", "", 2, 4 * time.Second},
		{"garbage backs off", "soon", 0, time.Second},
		{"capped", "3600", 0, maxRetryWait},
		{"date in the past", "Mon, 02 Jan 2006 15:04:05 GMT", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfter(tt.header, tt.attempt); got != tt.want {
				t.Errorf("retryAfter(%q, %d) = %v, want %v", tt.header, tt.attempt, got, tt.want)
			}
		})
	}
}

// TestRetryingDoer drives the doer against a real HTTP server that refuses
// twice with 429 and then answers: the body is sent again on every attempt.
func TestRetryingDoer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"x":1}` {
			t.Errorf("attempt %d: body %q", calls.Load()+1, b)
		}
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&retryingDoer{c: srv.Client()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || calls.Load() != 3 {
		t.Errorf("status %d after %d calls, want 201 after 3", resp.StatusCode, calls.Load())
	}
}

func TestRetryingDoer_givesUp(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := (&retryingDoer{c: srv.Client()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || calls.Load() != maxRetries+1 {
		t.Errorf("status %d after %d calls, want 503 after %d", resp.StatusCode, calls.Load(), maxRetries+1)
	}
}

func TestRetryingDoer_cancelled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	_, err := (&retryingDoer{c: srv.Client()}).Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("the wait ignored the context")
	}
}

func TestAddResponseError(t *testing.T) {
	c := &apiClient{endpoint: "http://sb"}
	tests := []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{
			name:   "validation problems each on a line",
			status: 422,
			body: `{"error":{"code":"validation_failed","message":"invalid connector","requestId":"req-1",
				"details":{"problems":[{"field":"baseUrl","problem":"must be an absolute http(s) URL"},{"field":"name","problem":"bad"}]}}}`,
			want: []string{"422 validation_failed: invalid connector", "\n  - baseUrl: must be an absolute http(s) URL", "\n  - name: bad", "Request id: req-1"},
		},
		{
			name:   "precondition failed hints at refresh",
			status: 412,
			body:   `{"error":{"code":"precondition_failed","message":"version mismatch","requestId":"r"}}`,
			want:   []string{"412 precondition_failed", "changed outside Terraform"},
		},
		{
			name:   "unauthenticated names the variable",
			status: 401,
			body:   `{"error":{"code":"unauthenticated","message":"unknown or revoked API key","requestId":"r"}}`,
			want:   []string{"unknown or revoked API key", EnvAPIKey},
		},
		{
			name:   "missing scope",
			status: 403,
			body:   `{"error":{"code":"forbidden","message":"needs scope admin","requestId":"r","details":{"requiredScopes":["admin"]}}}`,
			want:   []string{"needs scope admin", "requiredScopes=[admin]", "lacks a scope"},
		},
		{
			name:   "not our error shape",
			status: 502,
			body:   `<html>bad gateway</html>`,
			want:   []string{"502: <html>bad gateway</html>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var diags diag.Diagnostics
			c.addResponseError(&diags, "create thing", tt.status, []byte(tt.body))
			if len(diags) != 1 || diags[0].Summary() != "Switchboard: cannot create thing" {
				t.Fatalf("diags = %v", diags)
			}
			for _, w := range tt.want {
				if !strings.Contains(diags[0].Detail(), w) {
					t.Errorf("detail %q lacks %q", diags[0].Detail(), w)
				}
			}
		})
	}
}
