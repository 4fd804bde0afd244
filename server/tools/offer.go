package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// MaxOffered bounds the tools a loop offers (with the caller's functions):
// the function limit of /v1/function-calling.
const MaxOffered = 128

// Offer is what a model tool loop offers: the entries of its actions
// field and the name of a stored toolset (either may be empty; the union).
type Offer struct {
	Actions []string
	Toolset string
}

// Empty reports whether o offers nothing.
func (o Offer) Empty() bool { return len(o.Actions) == 0 && o.Toolset == "" }

// Offered resolves o into the tools p may run, in catalog order, and the
// Selection they come from. It fails with errs.Forbidden when p lacks the
// invoke scope, when an explicit "connector.action" entry is outside p's
// policy (details.field names the entry) or when p may run none of the
// actions selected; with errs.Validation (every problem, fields
// "actions[i]" and "toolset") for an invalid entry, an entry that selects
// no action, an unknown toolset, a selection of no action at all or more
// than MaxOffered tools.
func Offered(ctx context.Context, c *Catalog, ts *Toolsets, p *auth.Principal, o Offer) ([]Tool, *Selection, error) {
	if err := p.Require(auth.ScopeInvoke); err != nil && p != nil {
		return nil, nil, errs.E(errs.Forbidden, "credential %s lacks scope invoke, which offering actions to the model needs (actions, toolset)", p.ID).
			WithDetails(map[string]any{"requiredScopes": []string{auth.ScopeInvoke}})
	}
	var ps []errs.Problem
	entries := make([]string, 0, len(o.Actions))
	for i, e := range o.Actions {
		field := fmt.Sprintf("actions[%d]", i)
		if problem := EntryProblem(e); problem != "" {
			ps = append(ps, errs.Problem{Field: field, Problem: problem})
			continue
		}
		all, err := c.For(ctx, nil, Select([]string{e}))
		if err != nil {
			return nil, nil, err
		}
		conn, action, one := strings.Cut(e, ".")
		if one && action == "*" {
			one = false
		}
		switch {
		case len(all) == 0 && one:
			ps = append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf("no action %s exists (list the actions with GET /v1/connectors/%s/actions)", e, conn)})
			continue
		case len(all) == 0:
			ps = append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf("connector %q has no actions, or does not exist", conn)})
			continue
		case one && p != nil && !p.AllowsAction(conn, action):
			var fe *errs.Error
			if errors.As(auth.ActionNotAllowed(p, conn, action), &fe) {
				d := map[string]any{"field": field}
				for k, v := range fe.Details {
					d[k] = v
				}
				return nil, nil, errs.E(errs.Forbidden, "actions[%d]: %s", i, fe.Message).WithDetails(d)
			}
		}
		entries = append(entries, e)
	}
	var fromToolset *Selection
	if o.Toolset != "" {
		sel, err := ts.Selection(ctx, o.Toolset)
		switch {
		case errs.KindOf(err) == errs.NotFound:
			ps = append(ps, errs.Problem{Field: "toolset", Problem: fmt.Sprintf("toolset %q not found (list them with GET /v1/toolsets)", o.Toolset)})
		case err != nil:
			return nil, nil, err
		default:
			fromToolset = sel
		}
	}
	if err := errs.Problems("invalid tool selection", ps); err != nil {
		return nil, nil, err
	}
	sel := Select(entries)
	if fromToolset != nil {
		sel = sel.union(fromToolset)
	}
	all, err := c.For(ctx, nil, sel)
	if err != nil {
		return nil, nil, err
	}
	offered := slices.DeleteFunc(slices.Clone(all), func(t Tool) bool { return p != nil && !p.AllowsAction(t.Connector, t.Action) })
	switch {
	case len(all) == 0:
		return nil, nil, errs.Problems("invalid tool selection", []errs.Problem{{Field: "toolset", Problem: fmt.Sprintf("toolset %q selects no action that exists", o.Toolset)}})
	case len(offered) == 0:
		return nil, nil, errs.E(errs.Forbidden, "credential %s may run none of the %d actions selected (actions, toolset); its policy allows %s", p.ID, len(all), strings.Join(p.Connectors, ", ")).
			WithDetails(map[string]any{"selected": len(all), "allowedConnectors": p.Connectors})
	case len(offered) > MaxOffered:
		return nil, nil, errs.Problems("invalid tool selection", []errs.Problem{{Field: "actions", Problem: fmt.Sprintf("selects %d actions; at most %d tools can be offered to a model", len(offered), MaxOffered)}})
	}
	return offered, sel, nil
}

// union is the Selection of what s or o selects; neither may be nil.
func (s *Selection) union(o *Selection) *Selection {
	u := &Selection{actions: map[string]bool{}, connectors: map[string]bool{}}
	for _, x := range []*Selection{s, o} {
		for k := range x.actions {
			u.actions[k] = true
		}
		for k := range x.connectors {
			u.connectors[k] = true
		}
	}
	return u
}

// CatalogExecutor runs the actions of a loop as Catalog.Call does, for
// Principal within Selection, each admitted first.
type CatalogExecutor struct {
	Catalog   *Catalog
	Runner    Runner
	Principal *auth.Principal
	Selection *Selection
	// Admit, when set, admits each run before it starts (one request of
	// the caller's requests-per-minute limit); its refusal ends the loop.
	Admit func(ctx context.Context) error
}

// Execute implements Executor.
func (e CatalogExecutor) Execute(ctx context.Context, _ Tool, call Call) (connectors.RunResult, error) {
	if e.Admit != nil {
		if err := e.Admit(ctx); err != nil {
			return connectors.RunResult{}, Abort(err)
		}
	}
	_, res, err := e.Catalog.Call(ctx, e.Runner, e.Principal, e.Selection, call)
	return res, err
}
