package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

// apiClient is what the provider hands to resources and data sources: the
// generated client plus the endpoint it talks to (for error messages).
type apiClient struct {
	*client.ClientWithResponses
	endpoint string
}

// maxRetries bounds how often a request refused with 429 or 503 is retried.
const maxRetries = 4

// maxRetryWait caps one wait between retries.
const maxRetryWait = 30 * time.Second

// testTransport, when set (by this package's tests only), gives the HTTP
// transport for an endpoint: the tests route the provider's traffic through
// a transport that validates every exchange against the OpenAPI spec.
var testTransport func(endpoint string) http.RoundTripper

// newAPIClient builds a client that authenticates with apiKey, identifies
// itself with a User-Agent and retries 429/503 answers honouring Retry-After.
func newAPIClient(endpoint, apiKey, version string) (*apiClient, error) {
	hc := &http.Client{
		Timeout: 2 * time.Minute,
		// The API never redirects to itself; a redirect is an answer to
		// pass on (the OAuth connect route's 302), never to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if testTransport != nil {
		hc.Transport = testTransport(endpoint)
	}
	doer := &retryingDoer{c: hc}
	c, err := client.NewClientWithResponses(endpoint,
		client.WithHTTPClient(doer),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+apiKey)
			r.Header.Set("User-Agent", "terraform-provider-switchboard/"+version)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return &apiClient{ClientWithResponses: c, endpoint: endpoint}, nil
}

// check makes sure the server answers and accepts the API key, so that a
// wrong endpoint or key is reported once, clearly, before any resource runs.
// Listing one API key is the cheapest authenticated call: a 403 (the key
// lacks the admin scope) still proves the key is valid.
func (c *apiClient) check(ctx context.Context) diag.Diagnostics {
	var diags diag.Diagnostics
	limit := 1
	resp, err := c.ListAPIKeysWithResponse(ctx, &client.ListAPIKeysParams{Limit: &limit})
	if err != nil {
		diags.AddError("Cannot reach Switchboard", c.transportDetail(err))
		return diags
	}
	switch resp.StatusCode() {
	case http.StatusOK, http.StatusForbidden:
		return nil
	case http.StatusUnauthorized:
		diags.AddError("Switchboard refused the API key",
			fmt.Sprintf("The server at %s answered 401: %s\n\nCheck api_key in the provider block or the %s environment variable: "+
				"the key may be mistyped, revoked or expired.", c.endpoint, errorMessage(resp.Body), EnvAPIKey))
	default:
		diags.AddError("Unexpected answer from Switchboard",
			fmt.Sprintf("GET %s/v1/api-keys answered %d: %s\n\nIs %s a Switchboard server?",
				c.endpoint, resp.StatusCode(), errorMessage(resp.Body), c.endpoint))
	}
	return diags
}

// transportDetail explains a request that got no HTTP answer.
func (c *apiClient) transportDetail(err error) string {
	var hint string
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		hint = "The request timed out."
	case strings.Contains(err.Error(), "connection refused"):
		hint = "Nothing listens there: is the server running (`switchboard serve`) and is the endpoint right?"
	}
	msg := fmt.Sprintf("Could not talk to the Switchboard server at %s: %s", c.endpoint, err)
	if hint != "" {
		msg += "\n\n" + hint
	}
	return msg + "\n\nSet the endpoint in the provider block or the " + EnvEndpoint + " environment variable."
}

// apiError is the error body of the native API.
type apiError struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"requestId"`
	Details   map[string]any `json:"details"`
}

func parseAPIError(body []byte) (apiError, bool) {
	var e struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Message == "" {
		return apiError{}, false
	}
	return *e.Error, true
}

// errorMessage is the server's message from an error body, or the body
// itself (truncated) when it is not one.
func errorMessage(body []byte) string {
	if e, ok := parseAPIError(body); ok {
		return e.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// addResponseError adds one diagnostic for a failed call: what the provider
// tried (what), the status, the server's message, each validation problem on
// its own line, the request id for the server's logs, and a hint for the
// statuses a user can act on.
func (c *apiClient) addResponseError(diags *diag.Diagnostics, what string, status int, body []byte) {
	summary := "Switchboard: cannot " + what
	var b strings.Builder
	e, ok := parseAPIError(body)
	if ok {
		fmt.Fprintf(&b, "The server answered %d %s: %s", status, e.Code, e.Message)
		if ps, ok := e.Details["problems"].([]any); ok {
			for _, p := range ps {
				if m, ok := p.(map[string]any); ok {
					fmt.Fprintf(&b, "\n  - %v: %v", m["field"], m["problem"])
				}
			}
		}
		rest := make([]string, 0, len(e.Details))
		for k, v := range e.Details {
			if k != "problems" {
				rest = append(rest, fmt.Sprintf("%s=%v", k, v))
			}
		}
		sort.Strings(rest)
		if len(rest) > 0 {
			b.WriteString("\nDetails: " + strings.Join(rest, ", "))
		}
		if e.RequestID != "" {
			b.WriteString("\nRequest id: " + e.RequestID)
		}
	} else {
		fmt.Fprintf(&b, "The server answered %d: %s", status, errorMessage(body))
	}
	switch status {
	case http.StatusUnauthorized:
		b.WriteString("\n\nCheck api_key in the provider block or the " + EnvAPIKey + " environment variable.")
	case http.StatusForbidden:
		if !ok || e.Code == "forbidden" {
			b.WriteString("\n\nThe provider's API key lacks a scope this operation needs.")
		}
	case http.StatusPreconditionFailed:
		b.WriteString("\n\nThe object was changed outside Terraform since it was last read. " +
			"Run `terraform apply -refresh-only` (or a plan, which refreshes) and apply again.")
	}
	diags.AddError(summary, b.String())
}

// addTransportError adds a diagnostic for a request without an answer.
func (c *apiClient) addTransportError(diags *diag.Diagnostics, what string, err error) {
	diags.AddError("Switchboard: cannot "+what, c.transportDetail(err))
}

// retryingDoer retries requests answered 429 or 503, waiting as the
// Retry-After header says (exponential backoff when it is absent).
type retryingDoer struct {
	c *http.Client
}

var _ client.HttpRequestDoer = (*retryingDoer)(nil)

// Do implements client.HttpRequestDoer.
func (d *retryingDoer) Do(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := d.c.Do(req)
		if err != nil || attempt == maxRetries ||
			(resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) ||
			(req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		wait := retryAfter(resp.Header.Get("Retry-After"), attempt)
		resp.Body.Close()
		t := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// retryAfter is how long to wait before attempt+1.
func retryAfter(h string, attempt int) time.Duration {
	wait := time.Duration(1<<attempt) * time.Second
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s >= 0 {
		wait = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		wait = time.Until(t)
	}
	return min(max(wait, 0), maxRetryWait)
}
