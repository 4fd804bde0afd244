package connectors_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

var ctx = context.Background()

// recorder keeps events as JSON, like a real recorder writes them; fail
// makes Record fail, to prove the write shares its transaction.
type recorder struct {
	events []recorded
	fail   bool
}

type recorded struct {
	Type string
	Data json.RawMessage
}

var _ events.Recorder = (*recorder)(nil)

func (r *recorder) Record(tx store.Tx, typ string, data any) error {
	if !tx.Writable() {
		return errors.New("Record outside a write transaction")
	}
	if r.fail {
		return errors.New("recorder failed")
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	tx.OnCommit(func() { r.events = append(r.events, recorded{typ, b}) })
	return nil
}

func (r *recorder) types() []string {
	var out []string
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

func newService(t *testing.T) (*connectors.Service, *recorder, *store.Bolt) {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	svc := &connectors.Service{Store: st, Vault: v, Events: rec, Now: func() time.Time { now = now.Add(time.Second); return now }}
	return svc, rec, st
}

const secret = "s3cr3t-client-secret-value"

func oauthConnector(name string) connectors.Connector {
	return connectors.Connector{
		Name: name, BaseURL: "https://api.example.com/v1",
		Auth: connectors.Auth{Type: connectors.AuthOAuth2, Grant: connectors.GrantClientCredentials, TokenURL: "https://auth.example.com/token", ClientID: "cid", ClientSecret: secret, Scopes: []string{"read"}},
	}
}

func TestServiceEventsAndSecrets(t *testing.T) {
	svc, rec, st := newService(t)
	c, err := svc.CreateConnector(ctx, oauthConnector("crm"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.ClientSecret != "" || !c.Auth.HasClientSecret || c.Version != 1 {
		t.Fatalf("created = %+v", c)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := svc.CreateAction(ctx, "crm", connectors.Action{Name: name, Method: "GET", Path: "/x"}); err != nil {
			t.Fatal(err)
		}
	}
	// Replace without a secret keeps it; the stored record never holds it.
	in := oauthConnector("crm")
	in.Auth.ClientSecret = ""
	in.Description = "changed"
	c2, err := svc.ReplaceConnector(ctx, "crm", in, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !c2.Auth.HasClientSecret || c2.Version != 2 || !c2.CreatedAt.Equal(c.CreatedAt) || !c2.UpdatedAt.After(c.UpdatedAt) {
		t.Fatalf("replaced = %+v", c2)
	}
	err = st.View(ctx, func(tx store.Tx) error {
		got, err := svc.ClientSecret(tx, "crm")
		if got != secret {
			t.Errorf("stored secret = %q, %v", got, err)
		}
		if raw := tx.Get(connectors.BucketConnectors, "crm"); bytes.Contains(raw, []byte(secret)) {
			t.Errorf("connector record holds the secret: %s", raw)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if err := svc.DeleteConnector(ctx, "crm", 0); err != nil {
		t.Fatal(err)
	}
	want := []string{events.ConnectorCreated, events.ActionCreated, events.ActionCreated, events.ConnectorUpdated, events.ActionDeleted, events.ActionDeleted, events.ConnectorDeleted}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	for _, e := range rec.events {
		if bytes.Contains(e.Data, []byte(secret)) || bytes.Contains(e.Data, []byte("clientSecret\"")) {
			t.Errorf("event %s holds the secret: %s", e.Type, e.Data)
		}
	}
	var first map[string]any
	if err := json.Unmarshal(rec.events[0].Data, &first); err != nil {
		t.Fatal(err)
	}
	if first["name"] != "crm" || first["auth"].(map[string]any)["clientSecretSet"] != true {
		t.Errorf("connector.created data = %v", first)
	}
	// An action's event carries it as the API shows it: empty maps, not null.
	if a := string(rec.events[1].Data); !strings.Contains(a, `"parameters":{}`) || !strings.Contains(a, `"headers":{}`) || !strings.Contains(a, `"connector":"crm"`) {
		t.Errorf("action.created data = %s", a)
	}
	// Deleted with its actions and secrets.
	_ = st.View(ctx, func(tx store.Tx) error {
		if got, _ := svc.ClientSecret(tx, "crm"); got != "" {
			t.Error("secret survived the connector")
		}
		n := 0
		_ = tx.Scan(connectors.BucketActions, "", "", func(string, []byte) (bool, error) { n++; return true, nil })
		if n != 0 {
			t.Errorf("%d actions survived the connector", n)
		}
		return nil
	})
}

func TestServiceWriteFailsWithItsEvent(t *testing.T) {
	svc, rec, _ := newService(t)
	rec.fail = true
	if _, err := svc.CreateConnector(ctx, oauthConnector("crm")); err == nil {
		t.Fatal("create succeeded although its event could not be recorded")
	}
	rec.fail = false
	if _, err := svc.GetConnector(ctx, "crm"); !errors.Is(err, errs.NotFound) {
		t.Fatalf("get after a failed create = %v, want not found (rolled back)", err)
	}
	if _, err := svc.CreateConnector(ctx, oauthConnector("crm")); err != nil {
		t.Fatal(err)
	}
	rec.fail = true
	if err := svc.DeleteConnector(ctx, "crm", 0); err == nil {
		t.Fatal("delete succeeded although its event could not be recorded")
	}
	if c, err := svc.GetConnector(ctx, "crm"); err != nil || !c.Auth.HasClientSecret {
		t.Fatalf("get after a failed delete = %+v, %v", c, err)
	}
}

func TestServiceSwitchingAwayFromOAuthDeletesTheSecret(t *testing.T) {
	svc, _, st := newService(t)
	if _, err := svc.CreateConnector(ctx, oauthConnector("crm")); err != nil {
		t.Fatal(err)
	}
	c, err := svc.ReplaceConnector(ctx, "crm", connectors.Connector{BaseURL: "https://api.example.com", Auth: connectors.Auth{Type: connectors.AuthBearer}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.HasClientSecret {
		t.Error("clientSecretSet after switching to bearer")
	}
	_ = st.View(ctx, func(tx store.Tx) error {
		if got, _ := svc.ClientSecret(tx, "crm"); got != "" {
			t.Error("secret kept after switching to bearer")
		}
		return nil
	})
	// Back to oauth2 client_credentials: the secret is required again.
	in := oauthConnector("crm")
	in.Auth.ClientSecret = ""
	_, err = svc.ReplaceConnector(ctx, "crm", in, 0)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Validation || !bytes.Contains(mustJSON(t, e.Details), []byte("auth.clientSecret")) {
		t.Fatalf("replace without a secret = %v, want 422 on auth.clientSecret", err)
	}
}

func TestServiceOnDeleteConnectorHook(t *testing.T) {
	svc, _, _ := newService(t)
	var got []string
	svc.OnDeleteConnector = append(svc.OnDeleteConnector, func(tx store.Tx, name string) error {
		got = append(got, name)
		return nil
	})
	if _, err := svc.CreateConnector(ctx, oauthConnector("crm")); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteConnector(ctx, "crm", 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"crm"}) {
		t.Errorf("hook calls = %v", got)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
