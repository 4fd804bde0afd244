package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Switchboard is a client of a Switchboard server: every generated
// operation (it embeds ClientWithResponses) plus the hand-written
// conveniences, such as running actions:
//
//	sb, err := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHBOARD_API_KEY"))
//	res, err := sb.Integrations("weather").Run(ctx, "forecast", map[string]any{"city": "Oslo"})
//	var f struct{ Celsius float64 `json:"celsius"` }
//	err = res.Decode(&f)
type Switchboard struct {
	*ClientWithResponses
	server string
}

// New returns a client of the server at endpoint (e.g.
// "http://127.0.0.1:8080") that sends apiKey (an API key or an access
// token) as its bearer credential; opts may set the HTTP client or add
// request editors.
func New(endpoint, apiKey string, opts ...ClientOption) (*Switchboard, error) {
	if apiKey != "" {
		opts = append([]ClientOption{WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+apiKey)
			return nil
		})}, opts...)
	}
	c, err := NewClient(endpoint, opts...)
	if err != nil {
		return nil, err
	}
	return &Switchboard{ClientWithResponses: &ClientWithResponses{ClientInterface: c}, server: c.Server}, nil
}

// Integrations returns the handle on one connector's actions:
// integrations.<connector> of the product's SDK shape.
func (s *Switchboard) Integrations(connector string) *Integration {
	return &Integration{s: s, connector: connector}
}

// Integration runs the actions of one connector.
type Integration struct {
	s          *Switchboard
	connector  string
	connection string
}

// Connection returns a handle that runs actions with the named connection
// (account) instead of the connector's "default" one.
func (i *Integration) Connection(name string) *Integration {
	c := *i
	c.connection = name
	return &c
}

// ActionResult is what running an action returns.
type ActionResult struct {
	// Result is the JSON of the action's result: the transformation's
	// return value, or the upstream body (parsed JSON when it is JSON,
	// else a string; null when empty).
	Result json.RawMessage
	// Status is the upstream's HTTP status.
	Status int
	// DurationMs is how long the invocation took on the server.
	DurationMs int64
}

// Decode unmarshals the result into v.
func (r *ActionResult) Decode(v any) error { return json.Unmarshal(r.Result, v) }

// Run runs action with params (a map or a struct that encodes to a JSON
// object; nil for none) and returns its result. A failure the server
// reports is an *APIError (errors.As) carrying its code, message, request
// id and details, e.g. code "upstream_error" with details.status.
func (i *Integration) Run(ctx context.Context, action string, params any) (*ActionResult, error) {
	body := struct {
		Action     string `json:"action"`
		Params     any    `json:"params,omitempty"`
		Connection string `json:"connection,omitempty"`
	}{Action: action, Params: params, Connection: i.connection}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("switchboard: encoding params of %s.%s: %w", i.connector, action, err)
	}
	res, err := i.s.RunActionWithBody(ctx, i.connector, "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("switchboard: reading the result of %s.%s: %w", i.connector, action, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, newAPIError(res, raw)
	}
	var out struct {
		Result     json.RawMessage `json:"result"`
		Status     int             `json:"status"`
		DurationMs int64           `json:"durationMs"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("switchboard: decoding the result of %s.%s: %w", i.connector, action, err)
	}
	if out.Result == nil {
		out.Result = json.RawMessage("null")
	}
	return &ActionResult{Result: out.Result, Status: out.Status, DurationMs: out.DurationMs}, nil
}

// APIError is an error the server answered with (the ErrorResponse shape).
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the machine-readable kind, e.g. "upstream_error".
	Code string
	// Message says what went wrong; never a secret.
	Message string
	// RequestID identifies the request in the server's logs.
	RequestID string
	// Details are kind-specific, e.g. "problems" or "status".
	Details map[string]any
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("switchboard: %d %s: %s", e.StatusCode, e.Code, e.Message)
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return msg
}

// IsCode reports whether err is an *APIError with the given code.
func IsCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}

func newAPIError(res *http.Response, body []byte) *APIError {
	e := &APIError{StatusCode: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	var wire struct {
		Error struct {
			Code      string         `json:"code"`
			Message   string         `json:"message"`
			RequestID string         `json:"requestId"`
			Details   map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.Error.Code != "" {
		e.Code, e.Message, e.Details = wire.Error.Code, wire.Error.Message, wire.Error.Details
		if wire.Error.RequestID != "" {
			e.RequestID = wire.Error.RequestID
		}
	} else {
		e.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(res.StatusCode), " ", "_"))
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 512 {
			e.Message = e.Message[:512]
		}
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// Endpoint returns the server URL the client talks to.
func (s *Switchboard) Endpoint() string { return strings.TrimSuffix(s.server, "/") }
