package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/transform"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Invocation defaults (config `connectors.*`).
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 10 << 20
	DefaultRetries          = 2
	DefaultMaxRetryAfter    = 10 * time.Second
	// MaxErrorBodyBytes bounds the upstream body quoted in an upstream_error.
	MaxErrorBodyBytes = 1024
)

// OAuthTokens supplies the access tokens of OAuth 2.0 connections
// (*oauthconn.Manager): Token a fresh one (refreshed before expiry),
// Refresh one other than stale after the upstream refused stale (401);
// the Invoker then retries once.
type OAuthTokens interface {
	Token(ctx context.Context, connector, connection string) (string, error)
	Refresh(ctx context.Context, connector, connection, stale string) (string, error)
}

// Invoker runs actions: it loads the definitions and credentials, builds
// the request, sends it through the egress guard with retries, caps the
// response, runs the transformation in the sandbox, keeps secrets out of
// everything it returns, and logs the invocation.
type Invoker struct {
	// Store holds definitions and connections.
	Store store.Store
	// Connections opens credentials.
	Connections *Connections
	// Guard dials upstreams.
	Guard *egress.Guard
	// Sandbox runs transformations.
	Sandbox *transform.Sandbox
	// Log records each invocation; none when nil.
	Log *InvocationLog
	// OAuth supplies OAuth 2.0 access tokens; without it OAuth 2.0
	// connectors cannot be invoked.
	OAuth OAuthTokens
	// Observe, when set, is told each invocation's outcome (metrics).
	Observe func(connector string, ok bool, d time.Duration)

	// DefaultTimeout applies to actions without timeoutMs (default 30s);
	// MaxTimeout caps any (default 120s).
	DefaultTimeout, MaxTimeout time.Duration
	// MaxResponseBytes caps an upstream body (default 10 MiB).
	MaxResponseBytes int64
	// Retries is how often an idempotent call is retried on 429, 502, 503
	// and 504 (default 2; negative for none).
	Retries int
	// MaxRetryAfter is the longest Retry-After honoured (default 10s); an
	// upstream asking for a longer wait gets no retry.
	MaxRetryAfter time.Duration
	// loads keeps what load read (definitions and opened credentials, so
	// only in memory) until a write to loadBuckets commits: a run reads
	// nothing from the store while nothing changed.
	loads store.Cache[loadKey, loaded]
}

type loadKey struct{ connector, action, connection string }

// loadBuckets are the buckets load reads.
var loadBuckets = []string{BucketConnectors, BucketActions, BucketConnections, vault.Bucket}

// RunInput is one invocation.
type RunInput struct {
	Connector string
	Action    string
	// Connection defaults to DefaultConnection.
	Connection string
	Params     map[string]any
	// RequestID is the caller's request id, for the log.
	RequestID string
	// Credentials, when set, are used instead of the stored connection's:
	// the connect page checks credentials before it stores them. Not for
	// OAuth 2.0 connectors, whose tokens are always the stored ones.
	Credentials *Credentials
	// MayCreateConnection says the caller may create connections
	// (connectors:write): only then does a run on a client_credentials
	// connector create a connection other than DefaultConnection that does
	// not exist yet.
	MayCreateConnection bool
}

// RunResult is what an invocation returns.
type RunResult struct {
	// Result is the JSON of the transformation's result, or of the raw
	// body: the parsed JSON when the response is JSON, else its text
	// (null when empty).
	Result json.RawMessage
	// Status is the upstream's HTTP status.
	Status int
	// DurationMs is how long the invocation took.
	DurationMs int64
}

func (iv *Invoker) timeout(a Action) time.Duration {
	d := iv.DefaultTimeout
	if d <= 0 {
		d = DefaultTimeout
	}
	if a.TimeoutMs > 0 {
		d = time.Duration(a.TimeoutMs) * time.Millisecond
	}
	maxT := iv.MaxTimeout
	if maxT <= 0 {
		maxT = DefaultMaxTimeout
	}
	return min(d, maxT)
}

func (iv *Invoker) maxResponse() int64 {
	if iv.MaxResponseBytes > 0 {
		return iv.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

func (iv *Invoker) retries() int {
	switch {
	case iv.Retries < 0:
		return 0
	case iv.Retries == 0:
		return DefaultRetries
	}
	return iv.Retries
}

func (iv *Invoker) maxRetryAfter() time.Duration {
	if iv.MaxRetryAfter > 0 {
		return iv.MaxRetryAfter
	}
	return DefaultMaxRetryAfter
}

// Run invokes an action. Errors are *errs.Error values safe to send: an
// action outside the policy of the caller in ctx (403
// auth.ActionNotAllowed, checked first and not logged), the
// caller's mistakes (400, 404), refused destinations (egress_denied),
// upstream failures (upstream_error 502 with details.status and a
// truncated, redacted details.body; upstream_timeout 504) and script
// failures (transformation_failed 422).
func (iv *Invoker) Run(ctx context.Context, in RunInput) (RunResult, error) {
	if p := auth.FromContext(ctx); p != nil && !p.AllowsAction(in.Connector, in.Action) {
		return RunResult{}, auth.ActionNotAllowed(p, in.Connector, in.Action)
	}
	start := time.Now()
	if in.Connection == "" {
		in.Connection = DefaultConnection
	}
	var known bool // the connector and action exist
	status, res, err := iv.run(ctx, in, &known)
	d := time.Since(start)
	res.DurationMs = d.Milliseconds()
	if iv.Log != nil {
		inv := Invocation{Connector: in.Connector, Action: in.Action, Connection: in.Connection, Status: status,
			DurationMs: res.DurationMs, RequestID: in.RequestID, CreatedAt: start.UTC()}
		if err != nil {
			inv.ErrorCode = string(errs.KindOf(err))
		}
		// Only invocations of an existing action are logged.
		if known {
			iv.Log.Record(inv)
		}
	}
	if iv.Observe != nil {
		iv.Observe(in.Connector, err == nil, d)
	}
	return res, err
}

// loaded is what an invocation reads from the store.
type loaded struct {
	connector Connector
	action    Action
	conn      *Connection
	cred      Credentials
	// connMissing: an OAuth 2.0 connector has no record of the connection.
	connMissing bool
}

func (iv *Invoker) load(ctx context.Context, in RunInput) (loaded, error) {
	if in.Credentials != nil {
		return iv.loadWith(ctx, in)
	}
	key := loadKey{in.Connector, in.Action, in.Connection}
	changes := iv.Store.Changes(loadBuckets...)
	if l, ok := iv.loads.Get(key, changes); ok {
		return l, l.check()
	}
	var l loaded
	err := iv.Store.View(ctx, func(tx store.Tx) error {
		var err error
		if l.connector, err = LoadConnector(tx, in.Connector); err != nil {
			return err
		}
		if l.action, err = LoadAction(tx, in.Connector, in.Action); err != nil {
			return err
		}
		switch l.connector.Auth.Type {
		case AuthNone:
			if in.Connection != DefaultConnection {
				return errs.E(errs.Invalid, "connector %q uses auth type none and takes no connection; leave connection out", in.Connector).
					WithDetails(map[string]any{"problems": []errs.Problem{{Field: "connection", Problem: "connector uses auth type none"}}})
			}
			return nil
		case AuthOAuth2:
			// The OAuth tokens say whether the connection can be used.
			l.connMissing = tx.Get(BucketConnections, connectionKey(in.Connector, in.Connection)) == nil
			return nil
		}
		conn, err := LoadConnection(tx, in.Connector, in.Connection)
		if errors.Is(err, errs.NotFound) {
			return errs.E(errs.NotFound, "connection %q of connector %q not found; create it with POST /v1/connectors/%s/connections", in.Connection, in.Connector, in.Connector).
				WithDetails(map[string]any{"connector": in.Connector, "connection": in.Connection})
		}
		if err != nil {
			return err
		}
		l.conn = &conn
		l.cred, err = iv.Connections.OpenCredentials(tx, in.Connector, in.Connection)
		return err
	})
	if err != nil {
		return l, err
	}
	iv.loads.Put(key, l, changes)
	return l, l.check()
}

// loadWith reads the connector and action of a run with the caller's own
// credentials (never cached: they are not the stored ones).
func (iv *Invoker) loadWith(ctx context.Context, in RunInput) (loaded, error) {
	var l loaded
	err := iv.Store.View(ctx, func(tx store.Tx) error {
		var err error
		if l.connector, err = LoadConnector(tx, in.Connector); err != nil {
			return err
		}
		l.action, err = LoadAction(tx, in.Connector, in.Action)
		return err
	})
	if err == nil && l.connector.Auth.Type == AuthOAuth2 {
		err = errs.E(errs.Invalid, "connector %q uses OAuth 2.0: its runs use the stored tokens, not given credentials", in.Connector)
	}
	l.cred = *in.Credentials
	return l, err
}

// check refuses a run on a connection that is not active.
func (l loaded) check() error {
	if l.conn != nil && l.conn.Status != ConnectionActive {
		c, n := l.connector.Name, l.conn.Name
		fix := fmt.Sprintf("supply its credentials again (PUT /v1/connectors/%s/connections/%s, scope connectors:write)", c, n)
		if l.conn.AuthType != l.connector.Auth.Type {
			fix = fmt.Sprintf("the connector's auth type is now %s: supply credentials of that type (PUT /v1/connectors/%s/connections/%s, scope connectors:write)", l.connector.Auth.Type, c, n)
		}
		why := ""
		if l.conn.Status == ConnectionReauthRequired {
			why = " (the connector's baseUrl or auth changed, so the credentials stored for the old target were dropped)"
		}
		return errs.E(errs.Conflict, "connection %q of connector %q is %s, not active%s; %s before running actions with it",
			n, c, l.conn.Status, why, fix).
			WithDetails(map[string]any{"connector": c, "connection": n, "status": l.conn.Status})
	}
	return nil
}

func (iv *Invoker) run(ctx context.Context, in RunInput, known *bool) (int, RunResult, error) {
	l, err := iv.load(ctx, in)
	*known = l.action.Name != ""
	if err != nil {
		return 0, RunResult{}, err
	}
	name := l.connector.Name + "." + l.action.Name
	oauth := l.connector.Auth.Type == AuthOAuth2
	if oauth {
		if iv.OAuth == nil {
			return 0, RunResult{}, errs.E(errs.Unavailable, "OAuth 2.0 connections are not available on this server")
		}
		if l.connMissing && l.connector.Auth.Grant == GrantClientCredentials && in.Connection != DefaultConnection && !in.MayCreateConnection {
			c := l.connector.Name
			return 0, RunResult{}, errs.E(errs.NotFound, "connection %q of connector %q does not exist; create it with POST /v1/connectors/%s/connections (scope connectors:write), or leave connection out to use %q",
				in.Connection, c, c, DefaultConnection).
				WithDetails(map[string]any{"connector": c, "connection": in.Connection})
		}
		if l.cred.Token, err = iv.OAuth.Token(ctx, l.connector.Name, in.Connection); err != nil {
			return 0, RunResult{}, err
		}
	}
	req, err := BuildRequest(l.connector, l.action, in.Params, l.cred)
	if err != nil {
		return 0, RunResult{}, err
	}
	red := NewRedactor(req.Secrets...)

	timeout := iv.timeout(l.action)
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, body, err := iv.send(callCtx, req, red, name, timeout)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && oauth {
		// The token was refused: one refresh, one retry.
		stale := l.cred.Token
		if l.cred.Token, err = iv.OAuth.Refresh(ctx, l.connector.Name, in.Connection, stale); err != nil {
			return resp.StatusCode, RunResult{}, err
		}
		if req, err = BuildRequest(l.connector, l.action, in.Params, l.cred); err != nil {
			return 0, RunResult{}, err
		}
		red = NewRedactor(append(req.Secrets, stale)...)
		resp, body, err = iv.send(callCtx, req, red, name, timeout)
	}
	if err != nil {
		return 0, RunResult{}, err
	}
	status := resp.StatusCode
	if status < 200 || status > 299 {
		return status, RunResult{}, upstreamStatusError(name, resp, body, red)
	}

	isJSON := jsonBody(resp.Header.Get("Content-Type"), body)
	var result json.RawMessage
	if l.action.Transformation != "" {
		if iv.Sandbox == nil {
			return status, RunResult{}, errs.E(errs.Unavailable, "transformations are not available on this server")
		}
		out, err := iv.Sandbox.Run(ctx, transform.Input{
			Name: name, Script: l.action.Transformation, Data: body, DataJSON: isJSON,
			Status: status, Headers: lowerHeaders(resp.Header),
		})
		if err != nil {
			var e *errs.Error
			if errors.As(err, &e) {
				e.Message = red.Text(e.Message)
			}
			return status, RunResult{}, err
		}
		result = out
	} else {
		result = rawResult(body, isJSON)
	}
	return status, RunResult{Result: red.JSON(result), Status: status}, nil
}

// jsonBody reports whether a response body is JSON: a JSON media type
// (application/json, anything+json) with a valid JSON body, or no media
// type and a body that parses.
func jsonBody(contentType string, body []byte) bool {
	if len(body) == 0 {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType != "" && err == nil && !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return false
	}
	return json.Valid(body)
}

// rawResult is the result of an action without transformation: JSON as
// is, else the body as a JSON string, null when empty.
func rawResult(body []byte, isJSON bool) json.RawMessage {
	switch {
	case len(body) == 0:
		return json.RawMessage("null")
	case isJSON:
		return json.RawMessage(body)
	}
	b, _ := json.Marshal(strings.ToValidUTF8(string(body), "\uFFFD"))
	return b
}

func lowerHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	return out
}

// idempotent methods may be retried.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// send makes the request, retrying idempotent ones on 429/502/503/504,
// and returns the final response with its body read (capped).
func (iv *Invoker) send(ctx context.Context, r *Request, red *Redactor, name string, timeout time.Duration) (*http.Response, []byte, error) {
	client := &http.Client{Transport: iv.Guard.Transport(), CheckRedirect: redirectPolicy(r)}
	for attempt := 0; ; attempt++ {
		req, err := r.HTTPRequest(ctx)
		if err != nil {
			return nil, nil, errs.Wrap(errs.Internal, err, "building the upstream request")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, transportError(ctx, err, red, name, timeout)
		}
		if attempt < iv.retries() && idempotent(r.Method) && retryable(resp.StatusCode) {
			if wait, ok := iv.retryWait(ctx, resp, attempt); ok {
				drain(resp)
				t := time.NewTimer(wait)
				select {
				case <-t.C:
					continue
				case <-ctx.Done():
					t.Stop()
					return nil, nil, transportError(ctx, ctx.Err(), red, name, timeout)
				}
			}
		}
		body, err := iv.readBody(ctx, resp, red, name, timeout)
		if err != nil {
			return nil, nil, err
		}
		return resp, body, nil
	}
}

// retryWait is how long to wait before retrying: the upstream's
// Retry-After when it gave one (no retry when it asks for more than
// MaxRetryAfter or more than the time left), else a short jittered
// exponential backoff.
func (iv *Invoker) retryWait(ctx context.Context, resp *http.Response, attempt int) (time.Duration, bool) {
	wait, given := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if given && wait > iv.maxRetryAfter() {
		return 0, false
	}
	if !given {
		wait = min(100*time.Millisecond<<attempt, iv.maxRetryAfter())
		wait = wait/2 + rand.N(wait/2+1)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, false
	}
	return wait, true
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > 1<<31 {
			n = 1 << 31
		}
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
}

func (iv *Invoker) readBody(ctx context.Context, resp *http.Response, red *Redactor, name string, timeout time.Duration) ([]byte, error) {
	defer resp.Body.Close()
	limit := iv.maxResponse()
	tooLarge := func() error {
		return errs.E(errs.Upstream, "the upstream's response to %s exceeds the limit of %d bytes (connectors.maxResponseBytes)", name, limit).
			WithDetails(map[string]any{"status": resp.StatusCode, "limitBytes": limit})
	}
	if resp.ContentLength > limit {
		return nil, tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, transportError(ctx, err, red, name, timeout)
	}
	if int64(len(body)) > limit {
		return nil, tooLarge()
	}
	return body, nil
}

// redirectPolicy follows at most egress.MaxRedirects redirects to http(s)
// and strips the credential, and the Referer that could carry a key in its
// query, when a redirect leaves the original origin (scheme, host, port).
func redirectPolicy(r *Request) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if err := egress.CheckRedirect(req, via); err != nil {
			return err
		}
		req.Header.Del("Referer")
		orig := via[0].URL
		if req.URL.Scheme == orig.Scheme && req.URL.Host == orig.Host {
			return nil
		}
		for _, h := range r.CredentialHeaders {
			req.Header.Del(h)
		}
		if r.CredentialQuery != "" {
			if q := req.URL.Query(); q.Has(r.CredentialQuery) {
				q.Del(r.CredentialQuery)
				req.URL.RawQuery = q.Encode()
			}
		}
		return nil
	}
}

// transportError classifies a failure to get a response, without the
// request URL (whose query may hold a key) and with secrets redacted.
func transportError(ctx context.Context, err error, red *Redactor, name string, timeout time.Duration) error {
	var e *errs.Error
	if errors.As(err, &e) { // egress refusals, too many redirects
		return e
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return errs.Wrap(errs.Unavailable, context.Canceled, "the call was cancelled")
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return errs.E(errs.UpstreamTimeout, "%s: the upstream did not answer within %s (the action's timeoutMs, else connectors.defaultTimeout)", name, timeout).
			WithDetails(map[string]any{"timeoutMs": timeout.Milliseconds()})
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return errs.E(errs.UpstreamTimeout, "%s: the upstream timed out", name)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return errs.E(errs.Upstream, "%s: could not resolve the upstream host %s", name, dns.Name)
	}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err // never the URL: its query may hold a key
	}
	msg := red.Text(cause.Error())
	return &errs.Error{Kind: errs.Upstream, Message: fmt.Sprintf("%s: the upstream request failed: %s", name, msg), Err: errors.New(msg)}
}

// upstreamStatusError reports a non-2xx answer with its status and the
// start of its body, secrets redacted.
func upstreamStatusError(name string, resp *http.Response, body []byte, red *Redactor) error {
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	text = red.Text(text)
	truncated := false
	if len(text) > MaxErrorBodyBytes {
		cut := MaxErrorBodyBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text, truncated = text[:cut], true
	}
	d := map[string]any{"status": resp.StatusCode, "body": text}
	if truncated {
		d["bodyTruncated"] = true
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if wait, ok := parseRetryAfter(ra, time.Now()); ok {
			d["retryAfterSeconds"] = int64(wait.Seconds())
		}
	}
	return errs.E(errs.Upstream, "%s: the upstream answered %d %s", name, resp.StatusCode, http.StatusText(resp.StatusCode)).WithDetails(d)
}
