package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		header  string
		attempt int
		want    time.Duration
		wantOK  bool
	}{
		{"seconds, exactly", "3", 0, 3 * time.Second, true},
		{"seconds with spaces", " 7 ", 3, 7 * time.Second, true},
		{"zero", "0", 2, 0, true},
		{"the longest wait waited for", "60", 0, maxRetryWait, true},
		{"longer: not retried", "61", 0, 61 * time.Second, false},
		{"an hour: not retried", "3600", 0, time.Hour, false},
		{"absent backs off", "", 2, 4 * time.Second, true},
		{"negative backs off", "-5", 1, 2 * time.Second, true},
		{"garbage backs off", "soon", 0, time.Second, true},
		{"HTTP date, exactly", "Fri, 02 Jan 2026 15:04:17 GMT", 0, 12 * time.Second, true},
		{"HTTP date in the past", "Fri, 02 Jan 2026 15:04:00 GMT", 0, 0, true},
		{"HTTP date too far: not retried", "Fri, 02 Jan 2026 16:04:05 GMT", 0, time.Hour, false},
		{"RFC 850 date", "Friday, 02-Jan-26 15:04:06 GMT", 0, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := retryAfter(tt.header, tt.attempt, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("retryAfter(%q, %d) = %v, %v; want %v, %v", tt.header, tt.attempt, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// recordSleeps is a retryingDoer sleep that records each wait instead of
// sleeping.
func recordSleeps(waits *[]time.Duration) func(context.Context, time.Duration) error {
	var mu sync.Mutex
	return func(_ context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return nil
	}
}

// TestRetryingDoer_honoursRetryAfter: against a real HTTP server that
// refuses with the given Retry-After headers, the doer waits exactly what
// each asks (the seconds form and the HTTP-date form), retries, and records
// the refusals in the operation's throttle log; a Retry-After beyond
// maxRetryWait is not waited for and the 429 is passed on.
func TestRetryingDoer_honoursRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		headers    func() []string // one per refusal, then 200
		wantStatus int
		wantWaits  func(t *testing.T, waits []time.Duration)
		wantLog    throttleCounts
	}{
		{
			name:       "seconds",
			headers:    func() []string { return []string{"2", "5"} },
			wantStatus: http.StatusOK,
			wantWaits: func(t *testing.T, waits []time.Duration) {
				if !slices.Equal(waits, []time.Duration{2 * time.Second, 5 * time.Second}) {
					t.Errorf("waits = %v, want [2s 5s]", waits)
				}
			},
			wantLog: throttleCounts{refused: 2, waited: 7 * time.Second},
		},
		{
			name: "HTTP date",
			headers: func() []string {
				return []string{time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)}
			},
			wantStatus: http.StatusOK,
			wantWaits: func(t *testing.T, waits []time.Duration) {
				// The date has a resolution of one second.
				if len(waits) != 1 || waits[0] <= 8*time.Second || waits[0] > 10*time.Second {
					t.Errorf("waits = %v, want one of 9-10 s", waits)
				}
			},
		},
		{
			name:       "longer than the provider waits: passed on",
			headers:    func() []string { return []string{"90"} },
			wantStatus: http.StatusTooManyRequests,
			wantWaits: func(t *testing.T, waits []time.Duration) {
				if len(waits) != 0 {
					t.Errorf("waits = %v, want none", waits)
				}
			},
			wantLog: throttleCounts{refused: 1, gaveUp: 1, maxAsked: 90 * time.Second},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			headers := tc.headers()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				if n <= len(headers) {
					w.Header().Set("Retry-After", headers[n-1])
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			ctx, _ := watchThrottling(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			var waits []time.Duration
			resp, err := (&retryingDoer{c: srv.Client(), sleep: recordSleeps(&waits)}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			tc.wantWaits(t, waits)
			got := throttleLogFrom(ctx)
			if tc.name == "HTTP date" {
				tc.wantLog = throttleCounts{refused: 1, waited: got.waited}
			}
			if got.throttleCounts != tc.wantLog {
				t.Errorf("throttle log = %+v, want %+v", got.throttleCounts, tc.wantLog)
			}
		})
	}
}

// TestThrottlingWarning: an operation whose requests the server throttled
// ends with one warning saying how many and how long the provider waited;
// one that was not throttled has none. The requests go through the
// provider's real client.
func TestThrottlingWarning(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"rate limit exceeded","requestId":"r"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer srv.Close()
	c, err := newAPIClient(srv.URL, "sb_test", "test")
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.doer.sleep = recordSleeps(&waits)
	for _, tc := range []struct {
		name string
		want []string // substrings of the warning; nil for no warning
	}{
		{"throttled twice", []string{"throttled 2 requests (429) during this operation; the provider waited 2 s", "limits.controlPlaneRequestsPerMinute"}},
		{"not throttled", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, report := watchThrottling(context.Background())
			var diags diag.Diagnostics
			diags.Append(c.check(ctx)...)
			report(&diags)
			if tc.want == nil {
				if len(diags) != 0 {
					t.Errorf("diags = %v, want none", diags)
				}
				return
			}
			if len(diags) != 1 || diags[0].Severity() != diag.SeverityWarning || diags[0].Summary() != throttledSummary {
				t.Fatalf("diags = %v, want one warning", diags)
			}
			for _, w := range tc.want {
				if !strings.Contains(diags[0].Detail(), w) {
					t.Errorf("warning %q lacks %q", diags[0].Detail(), w)
				}
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
