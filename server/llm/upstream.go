package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	fastjson "github.com/goccy/go-json"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

var osGetenv = os.Getenv

// maxResponseBytes caps an upstream's (non-streamed) response body.
const maxResponseBytes = 64 << 20

// maxErrorBytes caps how much of an upstream error body is read.
const maxErrorBytes = 64 << 10

// errTimeout is the cancellation cause of an upstream call that ran out of time.
var errTimeout = errors.New("upstream timeout")

// upstream is the HTTP plumbing an adapter shares: base URL, client,
// timeout, credential (only to redact it), and error mapping.
type upstream struct {
	provider string
	baseURL  string
	client   *http.Client
	timeout  time.Duration
	secret   string
	// setAuth adds the credential headers.
	setAuth func(h http.Header)
	// errorMessage extracts the human message of an error body.
	errorMessage func(body []byte) string
}

// CallError is an upstream failure: an *errs.Error safe to send, plus
// whether a fallback model should be tried.
type CallError struct {
	Err *errs.Error
	// Fallback is true for 429, 5xx, connection failures and timeouts.
	Fallback bool
}

// Unwrap returns the classified error.
func (e *CallError) Unwrap() error { return e.Err }

// Error returns the classified error's text.
func (e *CallError) Error() string { return e.Err.Error() }

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var (
	headerJSON        = []string{"application/json"}
	headerEventStream = []string{"text/event-stream"}
)

// newRequest builds a JSON POST (body != nil) or GET.
func (u *upstream) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := encodeBody(body)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "encode upstream request")
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.baseURL+path, rd)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "build upstream request")
	}
	// Shared, never-modified header values spare an allocation per request.
	if body != nil {
		req.Header["Content-Type"] = headerJSON
	}
	req.Header["Accept"] = headerJSON
	if u.setAuth != nil {
		u.setAuth(req.Header)
	}
	return req, nil
}

// encodeBody encodes an upstream request body. A body with its own
// MarshalJSON (the wire types that carry extra fields) is asked directly,
// not through the encoder, which would call it from a second encoder frame:
// the handler's goroutine keeps the deepest stack it ever reached for as
// long as the stream it opens stays open, and encoding is the deepest
// point of a request.
func encodeBody(body any) ([]byte, error) {
	if m, ok := body.(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return fastjson.Marshal(body)
}

// do sends a request bounded by the provider timeout and decodes a 2xx
// JSON answer into out; any failure comes back classified.
func (u *upstream) do(ctx context.Context, method, path string, body, out any) error {
	cctx, cancel := context.WithTimeoutCause(ctx, u.timeout, errTimeout)
	defer cancel()
	req, err := u.newRequest(cctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return u.transportError(ctx, cctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return u.statusError(resp, b)
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxResponseBytes+1)); err != nil {
		return u.transportError(ctx, cctx, err)
	}
	if buf.Len() > maxResponseBytes {
		return &CallError{Err: errs.E(errs.Upstream, "provider %q sent a response over %d bytes", u.provider, maxResponseBytes)}
	}
	if err := fastjson.Unmarshal(buf.Bytes(), out); err != nil {
		return &CallError{Err: errs.Wrap(errs.Upstream, err, fmt.Sprintf("provider %q sent a response Switchboard cannot read", u.provider))}
	}
	return nil
}

// openStream sends a streaming request. The returned stream body stays
// bounded by an idle timeout: if no byte arrives for the provider timeout
// (before the headers or between events), the call is cancelled.
func (u *upstream) openStream(ctx context.Context, path string, body any) (*streamBody, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(u.timeout, func() { cancel(errTimeout) })
	req, err := u.newRequest(sctx, http.MethodPost, path, body)
	if err != nil {
		timer.Stop()
		cancel(nil)
		return nil, err
	}
	req.Header["Accept"] = headerEventStream
	resp, err := u.client.Do(req)
	if err != nil {
		timer.Stop()
		err = u.transportError(ctx, sctx, err)
		cancel(nil)
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		resp.Body.Close()
		timer.Stop()
		cancel(nil)
		return nil, u.statusError(resp, b)
	}
	sb := &streamBody{u: u, parent: ctx, ctx: sctx, cancel: cancel, timer: timer, body: resp.Body}
	sb.events = NewSSEReader(sb, 0)
	return sb, nil
}

// streamBody is an open upstream event stream.
type streamBody struct {
	u      *upstream
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	body   io.ReadCloser
	events *SSEReader
	once   sync.Once
}

// Read implements io.Reader, re-arming the idle timer on every read.
func (s *streamBody) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.timer.Reset(s.u.timeout)
	}
	return n, err
}

// next returns the next event; io.EOF at the end; errors classified.
func (s *streamBody) next() (Event, error) {
	ev, err := s.events.Next()
	if err == nil || err == io.EOF {
		return ev, err
	}
	if errors.Is(err, ErrEventTooLarge) {
		return ev, &CallError{Err: errs.E(errs.Upstream, "provider %q sent a stream event over %d bytes", s.u.provider, DefaultMaxEventBytes)}
	}
	return ev, s.u.transportError(s.parent, s.ctx, err)
}

func (s *streamBody) close() error {
	s.once.Do(func() {
		s.timer.Stop()
		s.cancel(nil)
		s.body.Close()
	})
	return nil
}

// badEvent reports an event the adapter cannot read.
func (s *streamBody) badEvent(err error) error {
	return &CallError{Err: errs.Wrap(errs.Upstream, err, fmt.Sprintf("provider %q sent a stream event Switchboard cannot read", s.u.provider))}
}

// ErrClientGone is returned when the caller went away mid-call.
var ErrClientGone = errs.E(errs.Invalid, "the request was cancelled by the client")

// transportError classifies a failure to talk to the upstream: the
// caller's own cancellation, our timeout (504), or a connection error (502).
func (u *upstream) transportError(parent, cctx context.Context, err error) error {
	if parent.Err() != nil {
		return ErrClientGone
	}
	if errors.Is(context.Cause(cctx), errTimeout) {
		return &CallError{Err: errs.E(errs.UpstreamTimeout, "provider %q did not answer within %s", u.provider, u.timeout).
			WithDetails(map[string]any{"provider": u.provider}), Fallback: true}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // drop the URL from the message
	}
	reason := err.Error()
	var oe *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		reason = "connection reset"
	case errors.As(err, &oe) && oe.Op == "dial":
		reason = "cannot connect: " + oe.Err.Error()
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		reason = "connection closed unexpectedly"
	}
	return &CallError{Err: errs.Wrap(errs.Upstream, err, fmt.Sprintf("could not reach provider %q: %s", u.provider, u.redact(reason))).
		WithDetails(map[string]any{"provider": u.provider}), Fallback: true}
}

// statusError classifies a non-2xx upstream answer.
func (u *upstream) statusError(resp *http.Response, body []byte) error {
	msg := ""
	if u.errorMessage != nil {
		msg = u.errorMessage(body)
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	msg = truncate(u.redact(msg), 500)
	details := map[string]any{"provider": u.provider, "upstreamStatus": resp.StatusCode}
	code := resp.StatusCode
	switch {
	case code == http.StatusTooManyRequests:
		e := errs.E(errs.RateLimited, "provider %q is rate limiting requests: %s", u.provider, msg).WithDetails(details)
		e.RetryAfter = retryAfter(resp.Header)
		if e.RetryAfter > 0 {
			details["retryAfterSeconds"] = int(e.RetryAfter.Round(time.Second) / time.Second)
		}
		return &CallError{Err: e, Fallback: true}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &CallError{Err: errs.E(errs.Upstream, "provider %q refused Switchboard's credentials (HTTP %d); check the provider's apiKeyEnv", u.provider, code).WithDetails(details)}
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity || code == http.StatusRequestEntityTooLarge:
		return &CallError{Err: errs.E(errs.Invalid, "provider %q refused the request: %s", u.provider, msg).WithDetails(details)}
	case code == http.StatusRequestTimeout:
		return &CallError{Err: errs.E(errs.UpstreamTimeout, "provider %q timed out: %s", u.provider, msg).WithDetails(details), Fallback: true}
	case code >= 500:
		return &CallError{Err: errs.E(errs.Upstream, "provider %q failed (HTTP %d): %s", u.provider, code, msg).WithDetails(details), Fallback: true}
	}
	return &CallError{Err: errs.E(errs.Upstream, "provider %q answered HTTP %d: %s", u.provider, code, msg).WithDetails(details)}
}

// redact removes the provider credential from s.
func (u *upstream) redact(s string) string {
	if u.secret != "" && len(u.secret) >= 6 {
		s = strings.ReplaceAll(s, u.secret, "[redacted]")
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// retryAfter reads Retry-After (seconds or an HTTP date) or retry-after-ms.
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// jsonErrorMessage extracts error.message (OpenAI, Anthropic, Gemini all
// nest it so; Gemini streams may wrap it in an array), or a top-level
// message/detail string.
func jsonErrorMessage(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			body = arr[0]
		}
	}
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil {
		if len(body) > 0 && body[0] != '{' && body[0] != '<' {
			return string(body)
		}
		return ""
	}
	if len(e.Error) > 0 {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
			return inner.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	if e.Message != "" {
		return e.Message
	}
	if s, ok := e.Detail.(string); ok {
		return s
	}
	return ""
}

// streamFailure is an error event received from an upstream mid-stream.
func streamFailure(provider, msg string) error {
	if msg == "" {
		msg = "unknown error"
	}
	return &CallError{Err: errs.E(errs.Upstream, "provider %q failed mid-stream: %s", provider, truncate(msg, 500)).
		WithDetails(map[string]any{"provider": provider})}
}

// upstreamProtocol reports an answer that breaks the provider's protocol.
func upstreamProtocol(provider, what string) error {
	return &CallError{Err: errs.E(errs.Upstream, "provider %q %s", provider, what).WithDetails(map[string]any{"provider": provider})}
}
