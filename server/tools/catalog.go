// Package tools offers connector actions as tools: the catalog that names
// each action as a tool with a JSON Schema of its parameters and hints
// from its method, the selection of tools a credential may use, and
// toolsets (named selections served at /mcp/{toolset}).
package tools

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// MaxNameLength is the longest tool name (the limit of OpenAI's, Anthropic's
// and Gemini's function names).
const MaxNameLength = 64

// nameSeparator joins connector and action in a tool name; connector and
// action names never contain it, so an untruncated name reads back.
const nameSeparator = "-"

// Tool is one action offered as a tool.
type Tool struct {
	// Name is the tool's name: "<connector>-<action>", at most
	// MaxNameLength characters from [a-zA-Z0-9_-] (see Name).
	Name string
	// Connector and Action name the action the tool runs.
	Connector, Action string
	// Title is a human name: the connector's display name and the action.
	Title string
	// Description is the action's description.
	Description string
	// Method is the action's HTTP method.
	Method string
	// InputSchema is the JSON Schema of the action's parameters.
	InputSchema map[string]any
	// ReadOnly: the action does not change anything (GET, HEAD, OPTIONS).
	ReadOnly bool
	// Destructive: the action may delete (DELETE).
	Destructive bool
	// Idempotent: repeating the call has no further effect (the HTTP
	// idempotent methods).
	Idempotent bool
}

// Ref is the tool's "connector.action" reference.
func (t Tool) Ref() string { return t.Connector + "." + t.Action }

// Compare orders t against connector's action as the catalog does: by
// connector, then action.
func (t Tool) Compare(connector, action string) int {
	return cmp.Or(strings.Compare(t.Connector, connector), strings.Compare(t.Action, action))
}

// Name is the tool name of connector's action: "<connector>-<action>" when
// that fits MaxNameLength, else its first 55 characters, "-" and 8
// hexadecimal digits of the SHA-256 of "<connector>.<action>". The same
// action always gets the same name, whatever else exists.
func Name(connector, action string) string {
	n := connector + nameSeparator + action
	if len(n) <= MaxNameLength {
		return n
	}
	sum := sha256.Sum256([]byte(connector + "." + action))
	return n[:MaxNameLength-9] + "-" + hex.EncodeToString(sum[:4])
}

// Catalog lists every action as a tool, in a stable order (by connector,
// then action), kept in memory until the store reports a change to
// connectors or actions.
type Catalog struct {
	// Store holds connectors and actions.
	Store store.Store

	cache store.Cache[struct{}, *catalogView]
}

// catalogView is the catalog at one count of changes.
type catalogView struct {
	tools  []Tool
	byName map[string]int
}

var catalogBuckets = []string{connectors.BucketConnectors, connectors.BucketActions}

// view returns the catalog as the store holds it now.
func (c *Catalog) view(ctx context.Context) (*catalogView, error) {
	changes := c.Store.Changes(catalogBuckets...)
	if v, ok := c.cache.Get(struct{}{}, changes); ok {
		return v, nil
	}
	v := &catalogView{byName: map[string]int{}}
	err := c.Store.View(ctx, func(tx store.Tx) error {
		titles := map[string]string{}
		err := tx.Scan(connectors.BucketConnectors, "", "", func(_ string, b []byte) (bool, error) {
			var cn connectors.Connector
			if err := json.Unmarshal(b, &cn); err != nil {
				return false, err
			}
			titles[cn.Name] = cmp.Or(cn.DisplayName, cn.Name)
			return true, nil
		})
		if err != nil {
			return err
		}
		return tx.Scan(connectors.BucketActions, "", "", func(_ string, b []byte) (bool, error) {
			var a connectors.Action
			if err := json.Unmarshal(b, &a); err != nil {
				return false, err
			}
			v.tools = append(v.tools, fromAction(titles[a.Connector], a))
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	// Keys are "<connector>/<action>": sort by the pair, not the key,
	// so that "a_b/x" and "a/x" order as the connector names do.
	slices.SortFunc(v.tools, func(a, b Tool) int { return a.Compare(b.Connector, b.Action) })
	for i := range v.tools {
		name := v.tools[i].Name
		// Two truncated names sharing 55 characters and 32 bits of hash:
		// the later action in the stable order takes a numbered name.
		for n := 2; ; n++ {
			if _, taken := v.byName[name]; !taken {
				break
			}
			suffix := fmt.Sprintf("-%d", n)
			name = v.tools[i].Name[:min(len(v.tools[i].Name), MaxNameLength-len(suffix))] + suffix
		}
		v.tools[i].Name = name
		v.byName[name] = i
	}
	c.cache.Put(struct{}{}, v, changes)
	return v, nil
}

// For lists the tools the caller p may run, in catalog order, narrowed to
// sel when sel is not nil: the actions p's policy allows (every action
// when p is nil). It does not check scopes.
func (c *Catalog) For(ctx context.Context, p *auth.Principal, sel *Selection) ([]Tool, error) {
	v, err := c.view(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Tool, 0, len(v.tools))
	for _, t := range v.tools {
		if (p == nil || p.AllowsAction(t.Connector, t.Action)) && sel.Has(t.Connector, t.Action) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Lookup returns the tool named name that p may run within sel: NotFound
// when no action has that name or it lies outside sel, Forbidden
// (auth.ActionNotAllowed) when p's policy does not allow it.
func (c *Catalog) Lookup(ctx context.Context, p *auth.Principal, sel *Selection, name string) (Tool, error) {
	v, err := c.view(ctx)
	if err != nil {
		return Tool{}, err
	}
	i, ok := v.byName[name]
	if !ok || !sel.Has(v.tools[i].Connector, v.tools[i].Action) {
		return Tool{}, errs.E(errs.NotFound, "no tool named %q", name)
	}
	t := v.tools[i]
	if p != nil && !p.AllowsAction(t.Connector, t.Action) {
		return Tool{}, auth.ActionNotAllowed(p, t.Connector, t.Action)
	}
	return t, nil
}

// fromAction is a's tool; title is its connector's display name.
func fromAction(title string, a connectors.Action) Tool {
	t := Tool{
		Name:        Name(a.Connector, a.Name),
		Connector:   a.Connector,
		Action:      a.Name,
		Title:       cmp.Or(title, a.Connector) + ": " + a.Name,
		Description: cmp.Or(a.Description, fmt.Sprintf("%s %s on %s", a.Method, a.Path, a.Connector)),
		Method:      a.Method,
		InputSchema: InputSchema(a.Parameters),
	}
	switch a.Method {
	case "GET", "HEAD", "OPTIONS":
		t.ReadOnly, t.Idempotent = true, true
	case "PUT":
		t.Idempotent = true
	case "DELETE":
		t.Destructive, t.Idempotent = true, true
	}
	return t
}

// InputSchema is the JSON Schema of an action's parameters: an object with
// one property per parameter (type, description, enum, default), the
// required ones listed, and no others allowed.
func InputSchema(params map[string]connectors.Parameter) map[string]any {
	props := make(map[string]any, len(params))
	required := []string{}
	for name, p := range params {
		s := map[string]any{"type": p.Type}
		if p.Type == "array" {
			s["items"] = map[string]any{}
		}
		if p.Description != "" {
			s["description"] = p.Description
		}
		if len(p.Enum) > 0 {
			s["enum"] = p.Enum
		}
		if p.Default != nil {
			s["default"] = p.Default
		}
		props[name] = s
		if p.Required {
			required = append(required, name)
		}
	}
	slices.Sort(required)
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

// ConnectionHeader is the request header that picks the connection (the
// end user's account) a tool call uses.
const ConnectionHeader = "Switchboard-Connection"

// Connection is the connection a tool call by p uses: p's bound
// connection, else requested (the ConnectionHeader or a request field),
// else connectors.DefaultConnection. A bound credential asking for another
// connection is Forbidden.
func Connection(p *auth.Principal, requested string) (string, error) {
	if requested != "" && !auth.ValidConnectionName(requested) {
		return "", errs.E(errs.Invalid, "connection %q is not a connection name (%s)", requested, auth.ConnectionNamePattern).
			WithDetails(map[string]any{"connection": requested})
	}
	switch {
	case p != nil && p.Connection != "":
		if requested != "" && requested != p.Connection {
			return "", errs.E(errs.Forbidden, "credential %s is bound to connection %q; it cannot use connection %q (drop the %s header)", p.ID, p.Connection, requested, ConnectionHeader).
				WithDetails(map[string]any{"connection": requested, "boundConnection": p.Connection})
		}
		return p.Connection, nil
	case requested != "":
		return requested, nil
	}
	return connectors.DefaultConnection, nil
}

// Runner runs actions (*connectors.Invoker).
type Runner interface {
	Run(ctx context.Context, in connectors.RunInput) (connectors.RunResult, error)
}

// Call is one tool call.
type Call struct {
	// Name is the tool's name.
	Name string
	// Args are the action's parameters.
	Args map[string]any
	// Connection is the connection to use (see Connection).
	Connection string
	// RequestID is the caller's request id, for the invocation log.
	RequestID string
}

// Call runs the tool call.Name that p may run within sel, through run,
// exactly as POST /v1/integrations/{connector}/run runs its action. It
// returns the tool (when found) and what the action returned; errors are
// Lookup's and run's.
func (c *Catalog) Call(ctx context.Context, run Runner, p *auth.Principal, sel *Selection, call Call) (Tool, connectors.RunResult, error) {
	t, err := c.Lookup(ctx, p, sel, call.Name)
	if err != nil {
		return Tool{}, connectors.RunResult{}, err
	}
	res, err := run.Run(ctx, connectors.RunInput{
		Connector: t.Connector, Action: t.Action, Connection: call.Connection, Params: call.Args,
		RequestID: call.RequestID, MayCreateConnection: p.Has(auth.ScopeConnectorsWrite),
	})
	return t, res, err
}
