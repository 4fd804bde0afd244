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
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
)

// apiClient is what the provider hands to resources and data sources: the
// generated client plus the endpoint it talks to (for error messages).
type apiClient struct {
	*client.ClientWithResponses
	endpoint string
	doer     *retryingDoer
}

// maxRetries bounds how often a request refused with 429 or 503 is retried.
const maxRetries = 4

// maxRetryWait is the longest Retry-After the provider waits for: a
// per-minute budget refills within a minute. A longer one is not retried.
const maxRetryWait = 60 * time.Second

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
	return &apiClient{ClientWithResponses: c, endpoint: endpoint, doer: doer}, nil
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
	case http.StatusTooManyRequests:
		b.WriteString("\n\nSwitchboard's rate limit refused the request, and the provider stopped retrying. " +
			"Apply again later, lower terraform's -parallelism, or raise the server's limits.controlPlaneRequestsPerMinute.")
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

// retryingDoer retries requests answered 429 or 503, waiting exactly as
// the Retry-After header says (seconds or an HTTP date; exponential backoff
// when it is absent). A 429 whose Retry-After asks for more than
// maxRetryWait is not retried: the refusal is reported rather than waited
// out in silence. Every 429 and every wait is recorded in the throttle log
// of the request's context (watchThrottling), which the operation turns
// into a warning.
type retryingDoer struct {
	c *http.Client
	// sleep waits d or until ctx ends (sleepCtx when nil; tests record).
	sleep func(ctx context.Context, d time.Duration) error
}

var _ client.HttpRequestDoer = (*retryingDoer)(nil)

// Do implements client.HttpRequestDoer.
func (d *retryingDoer) Do(req *http.Request) (*http.Response, error) {
	log := throttleLogFrom(req.Context())
	for attempt := 0; ; attempt++ {
		resp, err := d.c.Do(req)
		if err != nil {
			return resp, err
		}
		throttled := resp.StatusCode == http.StatusTooManyRequests
		if !throttled && resp.StatusCode != http.StatusServiceUnavailable {
			return resp, nil
		}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), attempt, time.Now())
		retry := ok && attempt < maxRetries && (req.Body == nil || req.GetBody != nil)
		if throttled {
			log.add(retry, wait)
		}
		if !retry {
			return resp, nil
		}
		resp.Body.Close()
		sleep := d.sleep
		if sleep == nil {
			sleep = sleepCtx
		}
		if err := sleep(req.Context(), wait); err != nil {
			return nil, err
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

// sleepCtx waits d, or less when ctx ends first (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter is how long to wait before attempt+1: exactly what the
// Retry-After header h asks, in seconds or as an HTTP date (relative to
// now; a date in the past is no wait), or 1, 2, 4, 8 s when it is absent
// or unreadable. ok is false when the wait would exceed maxRetryWait: the
// request is then not retried.
func retryAfter(h string, attempt int, now time.Time) (wait time.Duration, ok bool) {
	h = strings.TrimSpace(h)
	wait = time.Duration(1<<attempt) * time.Second
	if s, err := strconv.ParseInt(h, 10, 64); err == nil && s >= 0 {
		if s > int64(maxRetryWait/time.Second) {
			return time.Duration(min(s, 1<<32)) * time.Second, false
		}
		wait = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		wait = max(t.Sub(now), 0)
	}
	return wait, wait <= maxRetryWait
}

// throttleLog counts the requests of one Terraform operation that the
// server refused with 429, and how long the operation waited for them.
type throttleLog struct {
	mu sync.Mutex
	throttleCounts
}

type throttleCounts struct {
	refused  int           // 429 answers
	gaveUp   int           // of which not retried
	waited   time.Duration // total wait before retries
	maxAsked time.Duration // the longest Retry-After not waited for
}

func (l *throttleLog) add(retried bool, wait time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused++
	if retried {
		l.waited += wait
	} else {
		l.gaveUp++
		l.maxAsked = max(l.maxAsked, wait)
	}
}

type throttleKey struct{}

func throttleLogFrom(ctx context.Context) *throttleLog {
	l, _ := ctx.Value(throttleKey{}).(*throttleLog)
	return l
}

// watchThrottling starts the throttle log of one Terraform operation (a
// resource's create, read, update or delete, a data source's read): the
// requests made with the returned context are recorded, and report adds a
// warning to diags when the server throttled any of them. crud does this
// for every resource operation; every other operation that calls the API
// starts with
//
//	ctx, report := watchThrottling(ctx)
//	defer report(&resp.Diagnostics)
func watchThrottling(ctx context.Context) (context.Context, func(*diag.Diagnostics)) {
	l := &throttleLog{}
	return context.WithValue(ctx, throttleKey{}, l), func(diags *diag.Diagnostics) {
		if w, ok := l.warning(); ok {
			diags.AddWarning(throttledSummary, w)
		}
	}
}

// throttledSummary is the same for every operation, so that Terraform
// gathers the warnings of a whole run into one.
const throttledSummary = "Switchboard throttled requests (429)"

// warning is the detail of the warning, ok false when nothing was throttled.
func (l *throttleLog) warning() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refused == 0 {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Switchboard throttled %d %s (429) during this operation; the provider waited %s s as Retry-After asked",
		l.refused, plural(l.refused, "request", "requests"), strconv.FormatFloat(l.waited.Seconds(), 'f', -1, 64))
	if l.gaveUp > 0 {
		fmt.Fprintf(&b, ", and gave up on %d (the server asked to wait up to %s s, more than the provider waits, %s s, or the retries ran out)",
			l.gaveUp, strconv.FormatFloat(l.maxAsked.Seconds(), 'f', -1, 64), strconv.FormatFloat(maxRetryWait.Seconds(), 'f', -1, 64))
	}
	b.WriteString(".\n\nResources count against the server's control-plane limit, limits.controlPlaneRequestsPerMinute " +
		"(SWITCHBOARD_CONTROL_PLANE_REQUESTS_PER_MINUTE, default 6000 per credential); the model data sources against limits.requestsPerMinute " +
		"or the API key's rate_limit. Raise the limit on the server, or lower terraform's -parallelism.")
	return b.String(), true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
