package connectors

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Buckets of the store holding definitions: connectors by name, actions by
// "<connector>/<action>".
const (
	BucketConnectors = "connectors"
	BucketActions    = "actions"
)

// Service stores connector and action definitions. Every write is one
// transaction that also records its event and seals or deletes secrets.
type Service struct {
	// Store holds the definitions.
	Store store.Store
	// Vault seals OAuth 2.0 client secrets.
	Vault *vault.Vault
	// Events records connector.* and action.* events; none when nil.
	Events events.Recorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// MaxTimeout caps an action's timeoutMs; DefaultMaxTimeout when zero.
	MaxTimeout time.Duration
	// OnDeleteConnector hooks run inside the transaction that deletes a
	// connector, after its actions and secrets are gone, so that other
	// domains (connections, invocation logs) delete what belongs to it in
	// the same transaction.
	OnDeleteConnector []func(tx store.Tx, connector string) error
	// Guard, when set, refuses at save time a baseUrl its policy would
	// refuse at run time.
	Guard *egress.Guard
	// OnCredentialsMoved hooks run inside the transaction that replaces a
	// connector when the replacement changes where or how stored
	// credentials are sent (see credentialsMoved): c is the connector as
	// stored, why says what moved. Connections drops the credentials and
	// marks the connections reauth_required.
	OnCredentialsMoved []func(tx store.Tx, c Connector, why string) error
}

// normalizeConnector gives a connector without any auth field auth type
// none (auth is optional on the API).
func normalizeConnector(c *Connector) {
	a := c.Auth
	if a.Type == "" && a.Name == "" && a.In == "" && a.Prefix == "" && a.AuthorizationURL == "" && a.TokenURL == "" &&
		a.ClientID == "" && a.ClientSecret == "" && len(a.Scopes) == 0 && a.Grant == "" && len(a.AuthorizationParams) == 0 &&
		len(a.TokenParams) == 0 && a.ClientAuth == "" && len(a.RedirectURLs) == 0 {
		c.Auth.Type = AuthNone
	}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) events() events.Recorder {
	if s.Events == nil {
		return events.Nop{}
	}
	return s.Events
}

// CreateConnector validates and stores a new connector at version 1,
// sealing its client secret. A name in use is errs.Conflict; invalid input
// an errs.Validation error listing every problem.
//
// A baseUrl the egress guard refuses (an IP literal, or a host name all of
// whose addresses are refused) is a problem on baseUrl.
func (s *Service) CreateConnector(ctx context.Context, c Connector) (Connector, error) {
	normalizeConnector(&c)
	ps := validateConnector(c, false)
	if len(ps) == 0 {
		ps = s.egressProblems(ctx, c)
	}
	if err := errs.Problems("invalid connector", ps); err != nil {
		return Connector{}, err
	}
	now := s.now()
	c.CreatedAt, c.UpdatedAt, c.Version = now, now, 1
	var out Connector
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		if tx.Get(BucketConnectors, c.Name) != nil {
			return errs.E(errs.Conflict, "connector %q already exists; replace it with PUT /v1/connectors/%s or choose another name", c.Name, c.Name).
				WithDetails(map[string]any{"name": c.Name})
		}
		var err error
		if out, err = s.putConnector(tx, c, false); err != nil {
			return err
		}
		return s.events().Record(tx, events.ConnectorCreated, out)
	})
	if err != nil {
		return Connector{}, err
	}
	return out, nil
}

// putConnector seals or keeps the client secret and stores c without it;
// it returns c as the API shows it.
func (s *Service) putConnector(tx store.Tx, c Connector, secretStored bool) (Connector, error) {
	ref := ClientSecretRef(c.Name)
	switch {
	case c.Auth.Type != AuthOAuth2:
		if secretStored {
			if err := s.Vault.Delete(tx, ref); err != nil {
				return Connector{}, err
			}
		}
		c.Auth.HasClientSecret = false
	case c.Auth.ClientSecret != "":
		if err := s.Vault.Put(tx, ref, []byte(c.Auth.ClientSecret)); err != nil {
			return Connector{}, err
		}
		c.Auth.HasClientSecret = true
	default:
		c.Auth.HasClientSecret = secretStored
	}
	c.Auth.ClientSecret = ""
	if err := store.PutJSON(tx, BucketConnectors, c.Name, c); err != nil {
		return Connector{}, err
	}
	return c, nil
}

// GetConnector returns one connector (never its client secret).
func (s *Service) GetConnector(ctx context.Context, name string) (Connector, error) {
	var c Connector
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		c, err = LoadConnector(tx, name)
		return err
	})
	return c, err
}

// LoadConnector reads a connector inside a transaction; errs.NotFound
// naming it when absent.
func LoadConnector(tx store.Tx, name string) (Connector, error) {
	var c Connector
	if err := store.GetJSON(tx, BucketConnectors, name, &c); err != nil {
		if errors.Is(err, errs.NotFound) {
			return Connector{}, errs.E(errs.NotFound, "connector %q not found", name)
		}
		return Connector{}, err
	}
	return c, nil
}

// ClientSecret opens a connector's OAuth 2.0 client secret inside a
// transaction; "" when none is stored. Never log or return it.
func (s *Service) ClientSecret(tx store.Tx, connector string) (string, error) {
	b, err := s.Vault.Get(tx, ClientSecretRef(connector))
	return string(b), err
}

// ListConnectors returns a page of connectors in name order after the
// cursor (a name), at most limit long; next is "" on the last page.
func (s *Service) ListConnectors(ctx context.Context, cursor string, limit int) ([]Connector, string, error) {
	var (
		out  []Connector
		next string
	)
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		out, next, err = store.Page[Connector](tx, BucketConnectors, "", cursor, limit)
		return err
	})
	return out, next, err
}

// ReplaceConnector replaces connector name with c, keeping its createdAt
// and incrementing its version. ifMatch, when not 0, is the version the
// caller last saw (errs.PreconditionFailed otherwise). c.Name may be empty
// or must equal name. An empty client secret keeps the stored one; changing
// the auth type away from oauth2 deletes it. The baseUrl is checked
// against the egress guard as in CreateConnector.
//
// A replace that changes where or how stored credentials are sent (see
// credentialsMoved) runs the OnCredentialsMoved hooks in its transaction:
// the connections' credentials are dropped and they become
// reauth_required until supplied again. An oauth2 replace that moves the
// tokenUrl, or the baseUrl's origin of a client_credentials connector,
// without clientSecret is a problem on auth.clientSecret.
func (s *Service) ReplaceConnector(ctx context.Context, name string, c Connector, ifMatch int64) (Connector, error) {
	if c.Name == "" {
		c.Name = name
	}
	normalizeConnector(&c)
	egressPs := s.egressProblems(ctx, c)
	var out Connector
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		old, err := LoadConnector(tx, name)
		if err != nil {
			return err
		}
		if err := CheckVersion("connector", name, old.Version, ifMatch); err != nil {
			return err
		}
		ps := validateConnector(c, old.Auth.HasClientSecret)
		if c.Name != name {
			ps = append([]errs.Problem{{Field: "name", Problem: "must equal the connector name in the URL (\"" + name + "\"); a connector cannot be renamed: create the new one and delete the old"}}, ps...)
		}
		if len(ps) == 0 {
			ps = append(secretMoveProblems(old, c), egressPs...)
		}
		if err := errs.Problems("invalid connector", ps); err != nil {
			return err
		}
		next := c
		next.CreatedAt, next.UpdatedAt, next.Version = old.CreatedAt, s.now(), old.Version+1
		if out, err = s.putConnector(tx, next, old.Auth.HasClientSecret); err != nil {
			return err
		}
		if why := credentialsMoved(old, out); why != "" {
			for _, hook := range s.OnCredentialsMoved {
				if err := hook(tx, out, why); err != nil {
					return err
				}
			}
		}
		return s.events().Record(tx, events.ConnectorUpdated, out)
	})
	if err != nil {
		return Connector{}, err
	}
	return out, nil
}

// DeleteConnector deletes a connector with its actions, every secret under
// SecretPrefix(name) and whatever OnDeleteConnector hooks delete, in one
// transaction; an action.deleted event is recorded for each action, then
// connector.deleted. ifMatch as in ReplaceConnector.
func (s *Service) DeleteConnector(ctx context.Context, name string, ifMatch int64) error {
	return s.Store.Update(ctx, func(tx store.Tx) error {
		c, err := LoadConnector(tx, name)
		if err != nil {
			return err
		}
		if err := CheckVersion("connector", name, c.Version, ifMatch); err != nil {
			return err
		}
		var actions []Action
		prefix := actionKey(name, "")
		for {
			page, next, err := store.Page[Action](tx, BucketActions, prefix, "", 256)
			if err != nil {
				return err
			}
			for _, a := range page {
				if err := tx.Delete(BucketActions, actionKey(name, a.Name)); err != nil {
					return err
				}
			}
			actions = append(actions, page...)
			if next == "" {
				break
			}
		}
		if err := s.Vault.DeletePrefix(tx, SecretPrefix(name)); err != nil {
			return err
		}
		for _, hook := range s.OnDeleteConnector {
			if err := hook(tx, name); err != nil {
				return err
			}
		}
		if err := tx.Delete(BucketConnectors, name); err != nil {
			return err
		}
		for _, a := range actions {
			if err := s.events().Record(tx, events.ActionDeleted, a); err != nil {
				return err
			}
		}
		return s.events().Record(tx, events.ConnectorDeleted, c)
	})
}

// actionKey is an action's key in BucketActions. Names cannot contain "/",
// so "<connector>/" is a prefix of exactly that connector's actions.
func actionKey(connector, action string) string { return connector + "/" + action }

// CreateAction validates and stores a new action of connector at version 1.
// A missing connector is errs.NotFound, a name in use errs.Conflict,
// invalid input an errs.Validation error listing every problem.
func (s *Service) CreateAction(ctx context.Context, connector string, a Action) (Action, error) {
	a.Connector = connector
	normalizeAction(&a)
	problems := validateAction(a, s.MaxTimeout)
	now := s.now()
	a.CreatedAt, a.UpdatedAt, a.Version = now, now, 1
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		if _, err := LoadConnector(tx, connector); err != nil {
			return err
		}
		if err := errs.Problems("invalid action", problems); err != nil {
			return err
		}
		key := actionKey(connector, a.Name)
		if tx.Get(BucketActions, key) != nil {
			return errs.E(errs.Conflict, "action %q of connector %q already exists; replace it with PUT /v1/connectors/%s/actions/%s or choose another name", a.Name, connector, connector, a.Name).
				WithDetails(map[string]any{"connector": connector, "name": a.Name})
		}
		if err := store.PutJSON(tx, BucketActions, key, a); err != nil {
			return err
		}
		return s.events().Record(tx, events.ActionCreated, a)
	})
	if err != nil {
		return Action{}, err
	}
	return a, nil
}

// normalizeAction gives an action empty maps rather than nil ones, so that
// it is stored, returned and recorded in events as the API shows it.
func normalizeAction(a *Action) {
	if a.Parameters == nil {
		a.Parameters = map[string]Parameter{}
	}
	if a.Headers == nil {
		a.Headers = map[string]string{}
	}
}

// GetAction returns one action of a connector.
func (s *Service) GetAction(ctx context.Context, connector, name string) (Action, error) {
	var a Action
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		a, err = LoadAction(tx, connector, name)
		return err
	})
	return a, err
}

// LoadAction reads an action inside a transaction; errs.NotFound naming
// the connector or the action when either is absent.
func LoadAction(tx store.Tx, connector, name string) (Action, error) {
	var a Action
	err := store.GetJSON(tx, BucketActions, actionKey(connector, name), &a)
	if errors.Is(err, errs.NotFound) {
		if _, cerr := LoadConnector(tx, connector); cerr != nil {
			return Action{}, cerr
		}
		return Action{}, errs.E(errs.NotFound, "action %q of connector %q not found", name, connector)
	}
	return a, err
}

// ListActions returns a page of a connector's actions in name order after
// the cursor (an action name), at most limit long; next is "" on the last
// page. A missing connector is errs.NotFound.
func (s *Service) ListActions(ctx context.Context, connector, cursor string, limit int) ([]Action, string, error) {
	var (
		out  []Action
		next string
	)
	err := s.Store.View(ctx, func(tx store.Tx) error {
		if _, err := LoadConnector(tx, connector); err != nil {
			return err
		}
		prefix := actionKey(connector, "")
		after := ""
		if cursor != "" {
			after = prefix + cursor
		}
		var err error
		out, next, err = store.Page[Action](tx, BucketActions, prefix, after, limit)
		next = strings.TrimPrefix(next, prefix)
		return err
	})
	return out, next, err
}

// ReplaceAction replaces an action, keeping its createdAt and incrementing
// its version; ifMatch as in ReplaceConnector. a.Name may be empty or must
// equal name.
func (s *Service) ReplaceAction(ctx context.Context, connector, name string, a Action, ifMatch int64) (Action, error) {
	if a.Name == "" {
		a.Name = name
	}
	a.Connector = connector
	normalizeAction(&a)
	problems := validateAction(a, s.MaxTimeout)
	if a.Name != name {
		problems = append([]errs.Problem{{Field: "name", Problem: "must equal the action name in the URL (\"" + name + "\"); an action cannot be renamed: create the new one and delete the old"}}, problems...)
	}
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		old, err := LoadAction(tx, connector, name)
		if err != nil {
			return err
		}
		if err := CheckVersion("action", connector+"/"+name, old.Version, ifMatch); err != nil {
			return err
		}
		if err := errs.Problems("invalid action", problems); err != nil {
			return err
		}
		a.CreatedAt, a.UpdatedAt, a.Version = old.CreatedAt, s.now(), old.Version+1
		if err := store.PutJSON(tx, BucketActions, actionKey(connector, name), a); err != nil {
			return err
		}
		return s.events().Record(tx, events.ActionUpdated, a)
	})
	if err != nil {
		return Action{}, err
	}
	return a, nil
}

// DeleteAction deletes one action; ifMatch as in ReplaceConnector.
func (s *Service) DeleteAction(ctx context.Context, connector, name string, ifMatch int64) error {
	return s.Store.Update(ctx, func(tx store.Tx) error {
		a, err := LoadAction(tx, connector, name)
		if err != nil {
			return err
		}
		if err := CheckVersion("action", connector+"/"+name, a.Version, ifMatch); err != nil {
			return err
		}
		if err := tx.Delete(BucketActions, actionKey(connector, name)); err != nil {
			return err
		}
		return s.events().Record(tx, events.ActionDeleted, a)
	})
}

// CheckVersion is nil when ifMatch (an If-Match version, 0 for none) is
// the current version of the resource what/id, else errs.PreconditionFailed
// naming the current version.
func CheckVersion(what, id string, current, ifMatch int64) error {
	if ifMatch == 0 || ifMatch == current {
		return nil
	}
	return errs.E(errs.PreconditionFailed, "%s %q is at version %d, not %d (If-Match); fetch it again and retry", what, id, current, ifMatch).
		WithDetails(map[string]any{"currentVersion": current})
}
