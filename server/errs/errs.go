// Package errs is Switchboard's single error vocabulary: a Kind per class of
// failure, wrapped with context, mapped to HTTP in one place.
package errs

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Kind classifies an error; its string is the wire `error.code`.
// A Kind is itself an error so that errors.Is(err, errs.NotFound) works.
type Kind string

// Error returns the kind's wire code.
func (k Kind) Error() string { return string(k) }

// The kinds of failure the API reports.
const (
	Invalid              Kind = "invalid_request"       // 400: malformed request
	Unauthenticated      Kind = "unauthenticated"       // 401: missing or unknown credential
	Forbidden            Kind = "forbidden"             // 403: credential lacks a scope
	EgressDenied         Kind = "egress_denied"         // 403: outgoing request to a refused address
	NotFound             Kind = "not_found"             // 404
	MethodNotAllowed     Kind = "method_not_allowed"    // 405
	Conflict             Kind = "conflict"              // 409: already exists
	Gone                 Kind = "gone"                  // 410: expired or used up (a connect session)
	PreconditionFailed   Kind = "precondition_failed"   // 412: If-Match mismatch
	TooLarge             Kind = "too_large"             // 413: body or other limit exceeded
	UnsupportedMedia     Kind = "unsupported_media"     // 415: body is not JSON
	Validation           Kind = "validation_failed"     // 422: well-formed but invalid
	TransformationFailed Kind = "transformation_failed" // 422: a transformation script failed
	RateLimited          Kind = "rate_limited"          // 429
	BudgetExceeded       Kind = "budget_exceeded"       // 429: the credential's spend budget is used up
	Internal             Kind = "internal"              // 500
	Upstream             Kind = "upstream_error"        // 502: an upstream failed
	Unavailable          Kind = "unavailable"           // 503
	UpstreamTimeout      Kind = "upstream_timeout"      // 504
)

// Status is the HTTP status of a kind.
func (k Kind) Status() int {
	switch k {
	case Invalid:
		return http.StatusBadRequest
	case Unauthenticated:
		return http.StatusUnauthorized
	case Forbidden, EgressDenied:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case Conflict:
		return http.StatusConflict
	case Gone:
		return http.StatusGone
	case PreconditionFailed:
		return http.StatusPreconditionFailed
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case UnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case Validation, TransformationFailed:
		return http.StatusUnprocessableEntity
	case RateLimited, BudgetExceeded:
		return http.StatusTooManyRequests
	case Upstream:
		return http.StatusBadGateway
	case Unavailable:
		return http.StatusServiceUnavailable
	case UpstreamTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// Problem names one invalid field and what is wrong with it.
type Problem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// Error is a classified error with a caller-safe message.
// Message and Details must never contain a secret.
type Error struct {
	Kind    Kind
	Message string
	// Details is the wire `error.details` object.
	Details map[string]any
	// RetryAfter, when set, becomes the Retry-After header.
	RetryAfter time.Duration
	// Err is the underlying cause; it is logged, never sent.
	Err error
	// problems is the whole list of which Details holds the first
	// MaxProblems.
	problems []Problem
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message != "" {
		return e.Message + ": " + e.Err.Error()
	}
	if e.Message != "" {
		return e.Message
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return string(e.Kind)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is this error's Kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// E builds an error of kind k with a formatted message.
func E(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds an error of kind k around cause with a message.
func Wrap(k Kind, cause error, msg string) *Error {
	return &Error{Kind: k, Message: msg, Err: cause}
}

// WithDetails returns e with the details set. A "problems" list longer
// than MaxProblems is cut there (see listProblems).
func (e *Error) WithDetails(d map[string]any) *Error {
	e.Details = d
	if ps, ok := d["problems"].([]Problem); ok {
		e.listProblems(ps)
	}
	return e
}

// MaxProblems is the most problems an error lists in details.problems, so
// that an error stays small whatever the request: the rest are counted in
// details.problemsOmitted and in the message.
const MaxProblems = 100

// listProblems puts ps in e's details, the first MaxProblems of them, and
// keeps the whole list for ProblemsOf.
func (e *Error) listProblems(ps []Problem) {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.problems = ps
	if len(ps) <= MaxProblems {
		e.Details["problems"] = ps
		return
	}
	omitted := len(ps) - MaxProblems
	e.Details["problems"] = ps[:MaxProblems:MaxProblems]
	e.Details["problemsOmitted"] = omitted
	e.Message = fmt.Sprintf("%s (%d problems listed, and %d more)", e.Message, MaxProblems, omitted)
}

// Problems builds a 422 listing every invalid field (up to MaxProblems),
// or nil when ps is empty.
func Problems(msg string, ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	e := &Error{Kind: Validation, Message: msg}
	e.listProblems(ps)
	return e
}

// ProblemsOf returns every problem of err, including those its details
// leave out; nil when err lists none.
func ProblemsOf(err error) []Problem {
	var e *Error
	if errors.As(err, &e) {
		return e.problems
	}
	return nil
}

// KindOf returns the kind of err: the outermost classified error, else Internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var k Kind
	if errors.As(err, &k) {
		return k
	}
	return Internal
}
