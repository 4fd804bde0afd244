package tools

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// BucketToolsets holds toolsets by name.
const BucketToolsets = "toolsets"

// Limits on a toolset.
const (
	// MaxToolsetEntries bounds a toolset's tools list.
	MaxToolsetEntries = 256
	// MaxToolsetDescription bounds its description, in characters.
	MaxToolsetDescription = connectors.MaxDescriptionLength
)

// Toolset is a named selection of actions, served as its own MCP endpoint
// at /mcp/{name} and usable as the actions of a model's tool loop.
type Toolset struct {
	// Name identifies the toolset (connectors.NamePattern). Immutable.
	Name string `json:"name"`
	// Description says what the toolset is for.
	Description string `json:"description,omitempty"`
	// Tools lists "connector.action" and "connector.*" entries (see
	// Selection).
	Tools []string `json:"tools"`
	// CreatedAt is when the toolset was created (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when it was last replaced (UTC).
	UpdatedAt time.Time `json:"updatedAt"`
	// Version starts at 1 and increments on each replace (the ETag).
	Version int64 `json:"version"`
}

// Selection is the set of actions that a list of entries names: each
// entry is "connector.action" (one action), "connector.*" or "connector"
// (every action of the connector, present and future). The nil Selection
// selects every action.
type Selection struct {
	actions    map[string]bool // "connector.action"
	connectors map[string]bool
}

// nameRE is the syntax of toolset names.
var nameRE = regexp.MustCompile(connectors.NamePattern)

// selectionEntryRE is one Selection entry.
var selectionEntryRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}(\.([a-z][a-z0-9_]{0,63}|\*))?$`)

// EntryProblem says what is wrong with a Selection entry, "" when nothing.
func EntryProblem(e string) string {
	if selectionEntryRE.MatchString(e) {
		return ""
	}
	return fmt.Sprintf("%q is not connector.action, connector.* or connector (names match %s)", e, connectors.NamePattern)
}

// Select is the Selection of entries, which must be valid (EntryProblem).
func Select(entries []string) *Selection {
	s := &Selection{actions: map[string]bool{}, connectors: map[string]bool{}}
	for _, e := range entries {
		c, a, ok := strings.Cut(e, ".")
		if !ok || a == "*" {
			s.connectors[c] = true
		} else {
			s.actions[e] = true
		}
	}
	return s
}

// Has reports whether s selects connector's action.
func (s *Selection) Has(connector, action string) bool {
	return s == nil || s.connectors[connector] || s.actions[connector+"."+action]
}

// Toolsets stores toolsets.
type Toolsets struct {
	// Store holds them.
	Store store.Store
	// Events records events.ToolsetCreated, ToolsetUpdated and
	// ToolsetDeleted; none when nil.
	Events events.Recorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	cache store.Cache[string, *Selection]
}

func (s *Toolsets) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Millisecond)
	}
	return time.Now().UTC().Truncate(time.Millisecond)
}

func (s *Toolsets) events() events.Recorder {
	if s.Events == nil {
		return events.Nop{}
	}
	return s.Events
}

// validate lists every problem of t.
func validate(t Toolset, naming bool) []errs.Problem {
	var ps []errs.Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if naming && !nameRE.MatchString(t.Name) {
		add("name", "toolset name %q must match %s", t.Name, connectors.NamePattern)
	}
	if n := utf8.RuneCountInString(t.Description); n > MaxToolsetDescription {
		add("description", "is %d characters; the limit is %d", n, MaxToolsetDescription)
	}
	if strings.IndexFunc(t.Description, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }) >= 0 {
		add("description", "must not contain control characters other than tabs and newlines")
	}
	switch {
	case len(t.Tools) == 0:
		add("tools", "must list at least one entry such as weather.forecast or crm.*")
	case len(t.Tools) > MaxToolsetEntries:
		add("tools", "has %d entries; the limit is %d", len(t.Tools), MaxToolsetEntries)
	}
	seen := map[string]bool{}
	for i, e := range t.Tools {
		if p := EntryProblem(e); p != "" {
			add(fmt.Sprintf("tools[%d]", i), "%s", p)
		} else if seen[e] {
			add(fmt.Sprintf("tools[%d]", i), "%q is listed twice", e)
		}
		seen[e] = true
	}
	return ps
}

// Create validates and stores a new toolset at version 1: errs.Conflict
// when the name is taken, errs.Validation listing every problem.
func (s *Toolsets) Create(ctx context.Context, t Toolset) (Toolset, error) {
	if err := errs.Problems("invalid toolset", validate(t, true)); err != nil {
		return Toolset{}, err
	}
	t.CreatedAt = s.now()
	t.UpdatedAt, t.Version = t.CreatedAt, 1
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		if tx.Get(BucketToolsets, t.Name) != nil {
			return errs.E(errs.Conflict, "toolset %q already exists; replace it with PUT /v1/toolsets/%s or choose another name", t.Name, t.Name).
				WithDetails(map[string]any{"name": t.Name})
		}
		if err := store.PutJSON(tx, BucketToolsets, t.Name, t); err != nil {
			return err
		}
		return s.events().Record(tx, events.ToolsetCreated, t)
	})
	if err != nil {
		return Toolset{}, err
	}
	return t, nil
}

// Get returns one toolset: errs.NotFound when there is none.
func (s *Toolsets) Get(ctx context.Context, name string) (Toolset, error) {
	var t Toolset
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		t, err = load(tx, name)
		return err
	})
	return t, err
}

func load(tx store.Tx, name string) (Toolset, error) {
	var t Toolset
	if err := store.GetJSON(tx, BucketToolsets, name, &t); err != nil {
		if errors.Is(err, errs.NotFound) {
			return Toolset{}, errs.E(errs.NotFound, "toolset %q not found", name)
		}
		return Toolset{}, err
	}
	return t, nil
}

// List returns a page of toolsets in name order and the cursor of the next.
func (s *Toolsets) List(ctx context.Context, cursor string, limit int) ([]Toolset, string, error) {
	var (
		out  []Toolset
		next string
	)
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		out, next, err = store.Page[Toolset](tx, BucketToolsets, "", cursor, limit)
		return err
	})
	return out, next, err
}

// Replace validates t and stores it as the next version of the toolset
// name. t.Name may be empty; otherwise it must be name (toolsets are not
// renamed). What can fail, in this order: errs.NotFound,
// errs.PreconditionFailed when ifMatch (0 for any) is not the current
// version (RFC 9110 §13.2.2: before the body is judged), errs.Validation
// listing every problem.
func (s *Toolsets) Replace(ctx context.Context, name string, t Toolset, ifMatch int64) (Toolset, error) {
	renamed := t.Name != "" && t.Name != name
	t.Name = name
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		old, err := load(tx, name)
		if err != nil {
			return err
		}
		if err := connectors.CheckVersion("toolset", name, old.Version, ifMatch); err != nil {
			return err
		}
		ps := validate(t, false)
		if renamed {
			ps = append([]errs.Problem{{Field: "name", Problem: fmt.Sprintf("must equal the toolset name in the URL (%q); a toolset cannot be renamed: create the new one and delete the old", name)}}, ps...)
		}
		if err := errs.Problems("invalid toolset", ps); err != nil {
			return err
		}
		t.CreatedAt, t.UpdatedAt, t.Version = old.CreatedAt, s.now(), old.Version+1
		if err := store.PutJSON(tx, BucketToolsets, name, t); err != nil {
			return err
		}
		return s.events().Record(tx, events.ToolsetUpdated, t)
	})
	if err != nil {
		return Toolset{}, err
	}
	return t, nil
}

// Delete removes a toolset: errs.NotFound, errs.PreconditionFailed.
func (s *Toolsets) Delete(ctx context.Context, name string, ifMatch int64) error {
	return s.Store.Update(ctx, func(tx store.Tx) error {
		old, err := load(tx, name)
		if err != nil {
			return err
		}
		if err := connectors.CheckVersion("toolset", name, old.Version, ifMatch); err != nil {
			return err
		}
		if err := tx.Delete(BucketToolsets, name); err != nil {
			return err
		}
		return s.events().Record(tx, events.ToolsetDeleted, old)
	})
}

// Selection returns the Selection of the toolset name, kept in memory
// until toolsets change: errs.NotFound when there is none.
func (s *Toolsets) Selection(ctx context.Context, name string) (*Selection, error) {
	changes := s.Store.Changes(BucketToolsets)
	if sel, ok := s.cache.Get(name, changes); ok {
		return sel, nil
	}
	t, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	sel := Select(t.Tools)
	s.cache.Put(name, sel, changes)
	return sel, nil
}
