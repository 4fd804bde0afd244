// Package mcp serves connector actions as tools over the Model Context
// Protocol (streamable HTTP, stateless), with the go-sdk: tools/list
// answers the tools the caller may run, in the catalog's stable order and
// paginated; tools/call runs the action as POST
// /v1/integrations/{connector}/run does; subscribers of the 2026-07-28
// protocol's subscriptions/listen get notifications/tools/list_changed
// when actions change.
//
// Every request stands alone (no Mcp-Session-Id), so any replica can
// answer any request. The caller, the selection (a toolset) and the
// connection come from the HTTP request's context (WithCaller), set by the
// server's authentication and routing.
package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
)

// DefaultPageSize is how many tools one tools/list page holds.
const DefaultPageSize = 200

// DefaultWatchInterval is how often the server looks for changed actions
// to notify subscribers about.
const DefaultWatchInterval = 500 * time.Millisecond

// Options configure a Server.
type Options struct {
	// Catalog lists the tools.
	Catalog *tools.Catalog
	// Runner runs the actions (*connectors.Invoker).
	Runner tools.Runner
	// Store is watched for changes to connectors, actions and toolsets.
	Store store.Store
	// Version is the server version reported to clients.
	Version string
	// PageSize bounds a tools/list page (DefaultPageSize when 0).
	PageSize int
	// MaxBodyBytes bounds a request body (the SDK's default when 0).
	MaxBodyBytes int64
	// WatchInterval is how often changes are looked for
	// (DefaultWatchInterval when 0).
	WatchInterval time.Duration
	// Logger logs the SDK's own failures.
	Logger *slog.Logger
}

// Server is the MCP endpoint: an http.Handler.
type Server struct {
	o       Options
	sdk     *sdk.Server
	handler *sdk.StreamableHTTPHandler
	stop    context.CancelFunc
	done    sync.WaitGroup

	mu       sync.Mutex
	mirrored map[string]*sdk.Tool // what the SDK holds, to notify changes
}

// New builds the server and starts watching for changes; Close stops it.
func New(o Options) *Server {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = DefaultWatchInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, mirrored: map[string]*sdk.Tool{}}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "switchboard", Title: "Switchboard", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "Each tool runs one Switchboard connector action (named <connector>-<action>) with the credentials of the account this endpoint is bound to.",
		Logger:       o.Logger,
		PageSize:     o.PageSize,
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
	})
	s.sdk.AddReceivingMiddleware(s.serveTools)
	s.handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk }, &sdk.StreamableHTTPOptions{
		Stateless: true,
		// Answers are event streams: a subscriptions/listen request
		// receives its notifications on its own.
		Logger: o.Logger,
		// The server's own middleware has checked the credential; a
		// loopback listener behind a proxy sees the proxy's Host.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        o.MaxBodyBytes,
	})
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.done.Add(1)
	go s.watch(ctx)
	return s
}

// Close stops watching for changes.
func (s *Server) Close() {
	s.stop()
	s.done.Wait()
}

// ServeHTTP implements http.Handler; the request's context must carry the
// caller (WithCaller).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// Caller is who calls and what for: the tools they see and the account
// their calls use.
type Caller struct {
	// Principal is the credential (its policy narrows the tools).
	Principal *auth.Principal
	// Selection narrows the tools to a toolset's; nil for every tool.
	Selection *tools.Selection
	// Connection is the connection tool calls use (tools.Connection).
	Connection string
	// RequestID is the HTTP request's id, for the invocation log.
	RequestID string
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// serveTools answers tools/list and tools/call from the catalog, for the
// caller in ctx; other methods go to the SDK.
func (s *Server) serveTools(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "tools/list" && method != "tools/call" {
			return next(ctx, method, req)
		}
		c, ok := callerFrom(ctx)
		if !ok {
			return nil, errNoCaller
		}
		if method == "tools/list" {
			var cursor string
			if params, _ := req.GetParams().(*sdk.ListToolsParams); params != nil {
				cursor = params.Cursor
			}
			return s.list(ctx, c, cursor)
		}
		params, _ := req.GetParams().(*sdk.CallToolParamsRaw)
		if params == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs params with a name"}
		}
		return s.call(ctx, c, params)
	}
}

var errNoCaller = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "no authenticated caller"}

// list answers one page of the caller's tools after cursor.
func (s *Server) list(ctx context.Context, c Caller, cursor string) (*sdk.ListToolsResult, error) {
	all, err := s.o.Catalog.For(ctx, c.Principal, c.Selection)
	if err != nil {
		return nil, err
	}
	start := 0
	if cursor != "" {
		conn, action, err := decodeCursor(cursor)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: pass the nextCursor of the previous page"}
		}
		// The first tool after the cursor's, even when that one is gone.
		start, _ = slices.BinarySearchFunc(all, [2]string{conn, action}, func(t tools.Tool, k [2]string) int { return t.Compare(k[0], k[1]) })
		if start < len(all) && all[start].Connector == conn && all[start].Action == action {
			start++
		}
	}
	end := min(start+s.o.PageSize, len(all))
	res := &sdk.ListToolsResult{Tools: make([]*sdk.Tool, 0, end-start)}
	// The list depends on the caller's credential.
	res.CacheScope = "private"
	for _, t := range all[start:end] {
		res.Tools = append(res.Tools, wireTool(t))
	}
	if end < len(all) {
		res.NextCursor = encodeCursor(all[end-1])
	}
	return res, nil
}

func encodeCursor(t tools.Tool) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.Connector + "." + t.Action))
}

func decodeCursor(c string) (connector, action string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", err
	}
	connector, action, ok := strings.Cut(string(b), ".")
	if !ok {
		return "", "", errors.New("no separator")
	}
	return connector, action, nil
}

// runOutput is a tool's structuredContent: what POST
// /v1/integrations/{connector}/run answers.
type runOutput struct {
	Result     json.RawMessage `json:"result"`
	Status     int             `json:"status"`
	DurationMs int64           `json:"durationMs"`
}

// outputSchema is the shape of every tool's structuredContent: what
// POST /v1/integrations/{connector}/run answers.
var outputSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"result":     map[string]any{"description": "The action's result: the transformation's output, or the upstream's body (parsed JSON, else text)."},
		"status":     map[string]any{"type": "integer", "description": "The upstream's HTTP status."},
		"durationMs": map[string]any{"type": "integer", "description": "How long the call took."},
	},
	"required": []string{"result", "status", "durationMs"},
}

// wireTool is t as MCP lists it.
func wireTool(t tools.Tool) *sdk.Tool {
	openWorld := true
	a := &sdk.ToolAnnotations{Title: t.Title, ReadOnlyHint: t.ReadOnly, IdempotentHint: t.Idempotent, OpenWorldHint: &openWorld}
	if !t.ReadOnly {
		a.DestructiveHint = &t.Destructive
	}
	return &sdk.Tool{
		Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: outputSchema, Annotations: a,
	}
}

// call runs one tool call. A tool the caller may not see is a protocol
// error (invalid params), as an unknown one is; what the action's run
// reports (bad parameters, refused destinations, upstream failures,
// script errors) is a tool error the model can read.
func (s *Server) call(ctx context.Context, c Caller, p *sdk.CallToolParamsRaw) (*sdk.CallToolResult, error) {
	var args map[string]any
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &args); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("arguments of tool %q must be a JSON object of its parameters", p.Name)}
		}
	}
	t, res, err := s.o.Catalog.Call(ctx, s.o.Runner, c.Principal, c.Selection, tools.Call{
		Name: p.Name, Args: args, Connection: c.Connection, RequestID: c.RequestID,
	})
	switch kind := errs.KindOf(err); {
	case err == nil:
		out, err := json.Marshal(runOutput{Result: res.Result, Status: res.Status, DurationMs: res.DurationMs})
		if err != nil {
			return nil, err
		}
		// Encoded once: the text copy and the structured content are the same JSON.
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(out)}}, StructuredContent: json.RawMessage(out)}, nil
	case kind == errs.Internal || kind == errs.Unavailable:
		return nil, err
	case t.Name == "":
		// Unknown, or outside the caller's policy or toolset: the caller
		// does not have this tool.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: safeMessage(err)}
	default:
		return toolError(err), nil
	}
}

// safeMessage is err's message as the API would send it (never its cause).
func safeMessage(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// toolError is err as a tool result, the same a model reads in the tool
// loop (tools.ErrorResult).
func toolError(err error) *sdk.CallToolResult {
	text := tools.ErrorResult(err)
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: json.RawMessage(text)}
}

// watchedBuckets are the buckets whose changes may change a tool list.
var watchedBuckets = []string{connectors.BucketConnectors, connectors.BucketActions, tools.BucketToolsets}

// watch mirrors the catalog into the SDK's tool registry whenever the
// store reports a change, so that the SDK sends list_changed to the
// sessions subscribed to it. The registry is never used to answer.
func (s *Server) watch(ctx context.Context) {
	defer s.done.Done()
	tick := time.NewTicker(s.o.WatchInterval)
	defer tick.Stop()
	seen := s.o.Store.Changes(watchedBuckets...)
	if err := s.mirror(ctx, false); err != nil {
		s.o.Logger.Warn("mcp: read the tool catalog", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		changes := s.o.Store.Changes(watchedBuckets...)
		if changes == seen {
			continue
		}
		if err := s.mirror(ctx, true); err != nil {
			s.o.Logger.Warn("mcp: read the tool catalog", "err", err)
			continue
		}
		seen = changes
	}
}

// mirror updates the SDK's registry to the catalog; with notify, a change
// of toolsets alone (no tool added, changed or removed) still notifies.
func (s *Server) mirror(ctx context.Context, notify bool) error {
	all, err := s.o.Catalog.For(ctx, nil, nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	keep := make(map[string]bool, len(all))
	for _, t := range all {
		keep[t.Name] = true
		w := wireTool(t)
		if old, ok := s.mirrored[t.Name]; ok && sameTool(old, w) {
			continue
		}
		s.mirrored[t.Name] = w
		s.sdk.AddTool(w, s.unreachable)
		changed = true
	}
	var gone []string
	for name := range s.mirrored {
		if !keep[name] {
			gone = append(gone, name)
			delete(s.mirrored, name)
		}
	}
	if len(gone) > 0 {
		s.sdk.RemoveTools(gone...)
		changed = true
	}
	if notify && !changed {
		// A toolset changed: re-adding one tool makes the SDK notify.
		for _, t := range all[:min(1, len(all))] {
			s.sdk.AddTool(s.mirrored[t.Name], s.unreachable)
		}
	}
	return nil
}

func sameTool(a, b *sdk.Tool) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// unreachable is the handler of mirrored tools: serveTools answers every
// tools/call before the SDK would look one up.
func (s *Server) unreachable(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tool calls are served by the catalog"}
}
