package connectors

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Outcomes of an import for one definition: what Import did, or with
// dryRun would do.
const (
	OutcomeCreated   = "created"
	OutcomeReplaced  = "replaced"
	OutcomeUnchanged = "unchanged"
)

// ValidateAction lists every problem CreateAction would refuse a for
// (beyond its connector existing); maxTimeout caps timeoutMs as
// Service.MaxTimeout does (DefaultMaxTimeout when zero).
func ValidateAction(a Action, maxTimeout time.Duration) []errs.Problem {
	normalizeAction(&a)
	return validateAction(a, maxTimeout)
}

// ValidateConnector lists every problem CreateConnector would refuse c for,
// except the egress guard's verdict on its baseUrl.
func ValidateConnector(c Connector) []errs.Problem {
	normalizeConnector(&c)
	return validateConnector(c, false)
}

// ImportResult is what Import did, or with dryRun would do.
type ImportResult struct {
	// Connector is the connector as stored (or as it would be created).
	Connector Connector
	// ConnectorOutcome is created, or unchanged when a connector of that
	// name existed: an import never changes an existing connector.
	ConnectorOutcome string
	// Actions are the imported actions in the order given, as stored.
	Actions []ImportedAction
}

// ImportedAction is one action of an import and what happened to it.
type ImportedAction struct {
	Action  Action
	Outcome string // created, replaced or unchanged
}

// Import stores a connector and its actions as one change, in one
// transaction: connector c is created unless a connector of its name exists
// (which is kept as it is, and reported unchanged); each action is created,
// replaced when its definition differs from the stored one, or left
// unchanged. A replaced action keeps its createdAt, and its transformation
// and timeoutMs when the import brings none (they are not part of an API
// description). Events are recorded as by CreateConnector, CreateAction and
// ReplaceAction. With dryRun nothing is written and no event recorded; the
// outcomes say what would happen.
//
// Invalid input is one errs.Validation error listing every problem, with
// fields prefixed "connector." or "actions[<i>]."; a connector to create is
// checked against the egress guard as in CreateConnector.
func (s *Service) Import(ctx context.Context, c Connector, actions []Action, dryRun bool) (ImportResult, error) {
	normalizeConnector(&c)
	var ps []errs.Problem
	for i := range actions {
		actions[i].Connector = c.Name
		normalizeAction(&actions[i])
		for _, p := range validateAction(actions[i], s.MaxTimeout) {
			ps = append(ps, errs.Problem{Field: indexField("actions", i) + "." + p.Field, Problem: p.Problem})
		}
	}
	seen := map[string]int{}
	for i, a := range actions {
		if j, dup := seen[a.Name]; dup {
			ps = append(ps, errs.Problem{Field: indexField("actions", i) + ".name", Problem: "duplicates the name of " + indexField("actions", j)})
		}
		seen[a.Name] = i
	}
	actionProblems := ps
	egressPs := s.egressProblems(ctx, c)
	var out ImportResult
	run := s.Store.Update
	if dryRun {
		run = s.Store.View
	}
	err := run(ctx, func(tx store.Tx) error {
		// The store may run this function more than once: start afresh.
		out = ImportResult{Actions: make([]ImportedAction, 0, len(actions))}
		ps := actionProblems
		now := s.now()
		old, err := LoadConnector(tx, c.Name)
		switch {
		case err == nil:
			out.Connector, out.ConnectorOutcome = old, OutcomeUnchanged
		case errs.KindOf(err) != errs.NotFound:
			return err
		default:
			cps := validateConnector(c, false)
			if len(cps) == 0 {
				cps = egressPs
			}
			var all []errs.Problem
			for _, p := range cps {
				all = append(all, errs.Problem{Field: "connector." + p.Field, Problem: p.Problem})
			}
			ps = append(all, ps...)
			if err := errs.Problems("invalid import", ps); err != nil {
				return err
			}
			c.CreatedAt, c.UpdatedAt, c.Version = now, now, 1
			out.Connector, out.ConnectorOutcome = c, OutcomeCreated
			if !dryRun {
				if out.Connector, err = s.putConnector(tx, c, false); err != nil {
					return err
				}
				if err := s.events().Record(tx, events.ConnectorCreated, out.Connector); err != nil {
					return err
				}
			}
		}
		if err := errs.Problems("invalid import", ps); err != nil {
			return err
		}
		for _, a := range actions {
			prev, err := LoadAction(tx, c.Name, a.Name)
			outcome, event := OutcomeCreated, events.ActionCreated
			switch {
			case errs.KindOf(err) == errs.NotFound:
				a.CreatedAt, a.UpdatedAt, a.Version = now, now, 1
			case err != nil:
				return err
			default:
				if a.Transformation == "" {
					a.Transformation = prev.Transformation
				}
				if a.TimeoutMs == 0 {
					a.TimeoutMs = prev.TimeoutMs
				}
				if sameDefinition(prev, a) {
					out.Actions = append(out.Actions, ImportedAction{Action: prev, Outcome: OutcomeUnchanged})
					continue
				}
				a.CreatedAt, a.UpdatedAt, a.Version = prev.CreatedAt, now, prev.Version+1
				outcome, event = OutcomeReplaced, events.ActionUpdated
			}
			out.Actions = append(out.Actions, ImportedAction{Action: a, Outcome: outcome})
			if dryRun {
				continue
			}
			if err := store.PutJSON(tx, BucketActions, actionKey(c.Name, a.Name), a); err != nil {
				return err
			}
			if err := s.events().Record(tx, event, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ImportResult{}, err
	}
	return out, nil
}

// sameDefinition reports whether two actions define the same request
// (everything but timestamps and version), compared as stored: as JSON.
func sameDefinition(a, b Action) bool {
	a.CreatedAt, a.UpdatedAt, a.Version = b.CreatedAt, b.UpdatedAt, b.Version
	var ja, jb any
	if asJSON(a, &ja) != nil || asJSON(b, &jb) != nil {
		return false
	}
	return reflect.DeepEqual(ja, jb)
}

func asJSON(v any, out *any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func indexField(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
